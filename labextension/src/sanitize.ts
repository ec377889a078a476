/**
 * A sanitizer for model-written answers in the panel: JupyterLab's own, then nothing that
 * makes the browser load from another site with no click (an image, a video poster, a CSS
 * `url()`), whose URL could carry data out of the answer (a beacon) and which would load
 * again on every reload.
 *
 * An allowlist, not a list of known vectors: elements that load or style (media, frames,
 * forms, `<style>`, `<link>`) go; every attribute goes unless it is plain (`class`, `alt`,
 * table spans, ...) or a URL checked here: `img src` may be an image `data:` URL or on
 * Jupyter's own origin, `a href` a web or mail link (following it takes a click). URLs are
 * judged by the browser's own parser, so `/\host` and `/<tab>/host` are seen as the other
 * host they are. The `%%ask` cell gets the same rule from the kernel
 * (jupyter_ci/kernel/safe_markdown.py).
 */
import type { IRenderMime } from '@jupyterlab/rendermime';

/** Elements removed with their content: they load, run, submit or restyle the page. */
const DROPPED = [
  'audio', 'base', 'embed', 'form', 'frame', 'frameset', 'iframe', 'link', 'math',
  'meta', 'noscript', 'object', 'picture', 'portal', 'script', 'source', 'style', 'svg',
  'template', 'track', 'video'
];

/** Attributes that carry no URL and no style, kept on any element. */
const PLAIN = new Set([
  'abbr', 'align', 'alt', 'class', 'colspan', 'dir', 'headers', 'height', 'id', 'lang',
  'open', 'reversed', 'rowspan', 'scope', 'span', 'start', 'title', 'type', 'valign',
  'width', 'checked', 'disabled', 'value'
]);

/** Link schemes an answer may point at (a click opens them in a new tab). */
const LINK_PROTOCOLS = new Set(['http:', 'https:', 'mailto:']);

/** Parse a URL as the browser would, relative to this page; null when it cannot. */
function parse(value: string, base: string): URL | null {
  try {
    return new URL(value, base);
  } catch {
    return null;
  }
}

/** Say whether an image may load from `value`: an image data URL, or Jupyter's own origin. */
export function imageAllowed(value: string, base: string): boolean {
  const url = parse(value, base);
  if (url === null) {
    return false;
  }
  if (url.protocol === 'data:') {
    return /^image\//i.test(url.pathname);
  }
  return url.origin === new URL(base).origin;
}

/** Say whether a link may point at `value`: the web, mail, or this origin. */
export function linkAllowed(value: string, base: string): boolean {
  const url = parse(value, base);
  return url !== null && (LINK_PROTOCOLS.has(url.protocol) || url.origin === new URL(base).origin);
}

/** Keep an attribute only if it is plain, or a URL allowed where it stands. */
function keepAttribute(element: Element, name: string, value: string, base: string): boolean {
  if (PLAIN.has(name)) {
    return true;
  }
  const tag = element.localName;
  if (tag === 'img' && name === 'src') {
    return imageAllowed(value, base);
  }
  if (tag === 'a' && name === 'href') {
    return linkAllowed(value, base);
  }
  return tag === 'a' && (name === 'target' || name === 'rel');
}

/** Remove whatever could load from elsewhere from sanitized HTML (parsed inertly). */
export function dropRemoteLoads(html: string, base: string): string {
  const doc = new DOMParser().parseFromString(html, 'text/html');
  for (const element of Array.from(doc.body.querySelectorAll(DROPPED.join(',')))) {
    element.remove();
  }
  // A task list's checkbox stays; any other input (an image button loads its src) goes.
  for (const input of Array.from(doc.body.querySelectorAll('input'))) {
    if ((input.getAttribute('type') ?? '').trim().toLowerCase() !== 'checkbox') {
      input.remove();
    }
  }
  for (const element of Array.from(doc.body.querySelectorAll('*'))) {
    for (const attribute of Array.from(element.attributes)) {
      if (!keepAttribute(element, attribute.name.toLowerCase(), attribute.value, base)) {
        element.removeAttribute(attribute.name);
      }
    }
  }
  return doc.body.innerHTML;
}

/** Wrap a sanitizer so that its output never loads from elsewhere. */
export function withoutRemoteLoads(base: IRenderMime.ISanitizer): IRenderMime.ISanitizer {
  return {
    getAutolink: () => base.getAutolink?.() ?? true,
    sanitize: (dirty, options) =>
      dropRemoteLoads(base.sanitize(dirty, options), document.baseURI),
    allowNamedProperties: base.allowNamedProperties,
    allowCommandLinker: false
  };
}
