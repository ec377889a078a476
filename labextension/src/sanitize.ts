/**
 * A sanitizer for model-written answers in the panel: JupyterLab's own, then no image
 * that loads from another site (its URL could carry data out of the answer, a beacon).
 * The `%%ask` cell gets the same rule from the kernel (jupyter_ci/kernel/safe_markdown.py).
 */
import type { IRenderMime } from '@jupyterlab/rendermime';

/** An image source that makes the browser fetch from elsewhere (scheme or `//` host). */
function isRemote(src: string): boolean {
  const value = src.trim();
  return /^(?:[a-z][a-z0-9+.-]*:|\/\/)/i.test(value) && !/^data:/i.test(value);
}

/** Remove remote images from sanitized HTML (parsed inertly: nothing loads here). */
export function dropRemoteImages(html: string): string {
  if (!/<img/i.test(html)) {
    return html;
  }
  const doc = new DOMParser().parseFromString(html, 'text/html');
  for (const img of Array.from(doc.querySelectorAll('img'))) {
    if (isRemote(img.getAttribute('src') ?? '') || img.hasAttribute('srcset')) {
      img.remove();
    }
  }
  return doc.body.innerHTML;
}

/** Wrap a sanitizer so that its output never holds a remote image. */
export function withoutRemoteImages(base: IRenderMime.ISanitizer): IRenderMime.ISanitizer {
  return {
    getAutolink: () => base.getAutolink?.() ?? true,
    sanitize: (dirty, options) => dropRemoteImages(base.sanitize(dirty, options)),
    allowNamedProperties: base.allowNamedProperties,
    allowCommandLinker: base.allowCommandLinker
  };
}
