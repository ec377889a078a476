/**
 * Announce the labextension in every execute_request a notebook sends, and load
 * the kernel side (`%load_ext jupyter_ci`) before the first one of each kernel.
 *
 * The kernel learns from `metadata.jupyter_ci_frontend` that generated cells
 * will be inserted here (so it does not also show them inline) and which
 * generated cells follow the `%%ask` cell (so a re-run can reuse its answer).
 */
import type { ISessionContext } from '@jupyterlab/apputils';
import type { INotebookModel } from '@jupyterlab/notebook';
import type { Kernel } from '@jupyterlab/services';
import type { JSONObject } from '@lumino/coreutils';
import type { IDisposable } from '@lumino/disposable';

import { asksAbove, codeAbove } from './cells';
import { KernelFollower } from './kernelfollower';
import { cellsAboveAsk, generatedAfter } from './notebookcells';
import { readCells, sentCells } from './notebookcontext';
import { FRONTEND_KEY, PROTOCOL_VERSION } from './protocol';
import type { IWireFrontend } from './protocol.generated';

type RequestExecute = Kernel.IKernelConnection['requestExecute'];

/**
 * Loads the magics silently; a kernel without jupyter_ci (another environment)
 * or that is not IPython just ignores it. It calls the hook itself rather than
 * `%load_ext`, so a notebook's own `%load_ext jupyter_ci` does not then print
 * "already loaded", and it leaves no name in the user's namespace.
 *
 * The kernel's working directory is on sys.path (as ''), ahead of site-packages:
 * a plain import would run a `jupyter_ci.py` lying next to a notebook someone
 * sent. So the package is found on sys.path without the working directory, and
 * an import the user made themselves is left as it is.
 * tests/security/test_loader.py runs these exact lines.
 */
const LOAD_CODE = [
  'def _jupyter_ci_load():',
  '    import importlib.util, os, sys',
  '    if "jupyter_ci" not in sys.modules:',
  '        here = os.path.realpath(os.curdir)',
  '        path = [p for p in sys.path if os.path.realpath(p or os.curdir) != here]',
  '        spec = None',
  '        for finder in sys.meta_path:',
  '            find = getattr(finder, "find_spec", None)',
  '            spec = find("jupyter_ci", path) if find else None',
  '            if spec is not None:',
  '                break',
  '        if spec is None or spec.loader is None:',
  '            return',
  '        module = importlib.util.module_from_spec(spec)',
  '        sys.modules["jupyter_ci"] = module',
  '        try:',
  '            spec.loader.exec_module(module)',
  '        except BaseException:',
  '            del sys.modules["jupyter_ci"]',
  '            raise',
  '    sys.modules["jupyter_ci"].load_ipython_extension(get_ipython())',
  'try:',
  '    _jupyter_ci_load()',
  'except Exception:',
  '    pass',
  'finally:',
  '    del _jupyter_ci_load'
].join('\n');

const RESTARTING = new Set<Kernel.Status>(['restarting', 'autorestarting']);

/** Whether the magics still have to be loaded, and the kernel's language once known. */
interface IWrapState {
  load: boolean;
  language: string | null;
}

interface IWrapped {
  kernel: Kernel.IKernelConnection;
  original: RequestExecute;
  wrapper: RequestExecute;
  ownProperty: boolean;
  state: IWrapState;
}

/** Tell whether the kernel speaks Python: its reported language, else its spec name. */
function isPython(kernel: Kernel.IKernelConnection, language: string | null): boolean {
  return language !== null ? language === 'python' : /python/i.test(kernel.name);
}

/** Return the execute_request metadata with the frontend announcement added. */
export function announce(
  model: INotebookModel | null,
  metadata: JSONObject | undefined,
  path?: string
): JSONObject {
  const cellId = metadata?.cellId;
  const known = model !== null && typeof cellId === 'string';
  const generated = known ? generatedAfter(model, cellId) : [];
  const frontend: IWireFrontend = { protocol: PROTOCOL_VERSION, generated };
  if (path) {
    // An ask's notebook, for a page reloaded mid-ask whose %%ask cell was never saved.
    frontend.path = path;
  }
  // For an ask: the code above it, so the kernel can tell what a restart would lose, and
  // the asks above, whose steps may come after this request was sent (Run All).
  const cells = known ? cellsAboveAsk(model, cellId) : undefined;
  if (cells !== undefined) {
    const above = codeAbove(cells, cells.length);
    frontend.above = above;
    if (above !== null) {
      frontend.asks_above = asksAbove(cells, cells.length);
    }
    // The notebook's code cells: the model may propose a new source for one (edit_cell).
    if (model !== null) {
      frontend.cells = sentCells(readCells(model), cells.length);
    }
  }
  // The announcement is plain JSON data (wire.comm.Frontend, which the kernel reads strictly).
  return { ...(metadata ?? {}), [FRONTEND_KEY]: frontend as unknown as JSONObject };
}

/**
 * Wraps `requestExecute` of a notebook's current kernel connection, following
 * kernel changes, and restores it when disposed.
 */
export class FrontendAnnouncer implements IDisposable {
  constructor(
    private readonly _session: ISessionContext,
    private readonly _model: () => INotebookModel | null
  ) {
    this._follower = new KernelFollower(_session, {
      attach: kernel => this._wrap(kernel),
      detach: () => this._unwrap(),
      status: (kernel, status) => {
        if (RESTARTING.has(status) && this._wrapped?.kernel === kernel) {
          this._wrapped.state.load = true; // a restarted kernel has forgotten its extensions
        }
      }
    });
  }

  get isDisposed(): boolean {
    return this._follower.isDisposed;
  }

  dispose(): void {
    this._follower.dispose();
  }

  private _wrap(kernel: Kernel.IKernelConnection): void {
    const ownProperty = Object.prototype.hasOwnProperty.call(kernel, 'requestExecute');
    const original = kernel.requestExecute;
    const model = this._model;
    const session = this._session;
    const state: IWrapState = { load: true, language: null };
    kernel.info
      .then(info => {
        state.language = info.language_info.name;
      })
      .catch(() => undefined); // no info yet: the spec name decides
    const wrapper: RequestExecute = function (this: unknown, content, disposeOnDone, metadata) {
      if (state.load && isPython(kernel, state.language)) {
        // Same connection, same shell channel: the kernel runs this before the
        // user's request, also when Restart & Run All queues every cell at once.
        state.load = false;
        original.call(kernel, { code: LOAD_CODE, silent: true, store_history: false }, true);
      }
      return original.call(kernel, content, disposeOnDone, announce(model(), metadata, session.path));
    };
    kernel.requestExecute = wrapper;
    this._wrapped = { kernel, original, wrapper, ownProperty, state };
  }

  private _unwrap(): void {
    const wrapped = this._wrapped;
    this._wrapped = null;
    if (wrapped === null || wrapped.kernel.requestExecute !== wrapped.wrapper) {
      // Someone wrapped on top of us: leave their wrapper in place.
      return;
    }
    if (wrapped.ownProperty) {
      wrapped.kernel.requestExecute = wrapped.original;
    } else {
      delete (wrapped.kernel as Partial<Kernel.IKernelConnection>).requestExecute;
    }
  }

  private readonly _follower: KernelFollower;
  private _wrapped: IWrapped | null = null;
}
