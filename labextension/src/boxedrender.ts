/**
 * A notebook on a sandboxed kernel renders every output as untrusted, whatever its cell says.
 *
 * TrustGuard (trust.ts) takes back the trust a run or "Trust Notebook" gives a cell of such a
 * notebook, so it is never signed; but JupyterLab renders a cell's outputs again as trusted
 * the moment it is trusted, before any signal reaches this extension, and an `<img onerror>`
 * in them fires after it is gone. So the notebook's own renderer registry (each notebook
 * view has a clone) is told to pick only safe renderers and to hand them untrusted models
 * while its kernel is boxed: HTML sanitized, no JavaScript, no widgets.
 */
import type { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import type { IRenderMime } from '@jupyterlab/rendermime-interfaces';

const wrapped = new WeakSet<IRenderMimeRegistry>();

/** Give an untrusted view of a model: the same data, never trusted. */
function untrusted(model: IRenderMime.IMimeModel): IRenderMime.IMimeModel {
  return new Proxy(model, {
    get: (target, key) => (key === 'trusted' ? false : Reflect.get(target, key, target))
  });
}

/** Make `rendermime` render as untrusted whenever `boxed()` says so (once per registry). */
export function renderUntrustedWhen(rendermime: IRenderMimeRegistry, boxed: () => boolean): void {
  if (wrapped.has(rendermime)) {
    return;
  }
  wrapped.add(rendermime);
  const preferred = rendermime.preferredMimeType.bind(rendermime);
  rendermime.preferredMimeType = (bundle, safe) => preferred(bundle, boxed() ? 'ensure' : safe);
  const create = rendermime.createRenderer.bind(rendermime);
  rendermime.createRenderer = mimeType => {
    const renderer = create(mimeType);
    const render = renderer.renderModel.bind(renderer);
    renderer.renderModel = model => render(boxed() ? untrusted(model) : model);
    return renderer;
  };
}
