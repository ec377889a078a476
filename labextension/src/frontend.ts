/**
 * Announce the labextension in every execute_request a notebook sends.
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

import { generatedAfter } from './cells';
import { FRONTEND_KEY, PROTOCOL_VERSION } from './protocol';

type RequestExecute = Kernel.IKernelConnection['requestExecute'];

interface IWrapped {
  kernel: Kernel.IKernelConnection;
  original: RequestExecute;
  wrapper: RequestExecute;
  ownProperty: boolean;
}

/** Return the execute_request metadata with the frontend announcement added. */
export function announce(
  model: INotebookModel | null,
  metadata: JSONObject | undefined
): JSONObject {
  const cellId = metadata?.cellId;
  const generated =
    model !== null && typeof cellId === 'string' ? generatedAfter(model, cellId) : [];
  return {
    ...(metadata ?? {}),
    [FRONTEND_KEY]: { protocol: PROTOCOL_VERSION, generated }
  };
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
    _session.kernelChanged.connect(this._onKernelChanged, this);
    this._wrap(_session.session?.kernel ?? null);
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this._session.kernelChanged.disconnect(this._onKernelChanged, this);
    this._unwrap();
  }

  private _onKernelChanged(
    _: ISessionContext,
    change: { newValue: Kernel.IKernelConnection | null }
  ): void {
    this._unwrap();
    this._wrap(change.newValue);
  }

  private _wrap(kernel: Kernel.IKernelConnection | null): void {
    if (kernel === null || kernel.isDisposed) {
      return;
    }
    const ownProperty = Object.prototype.hasOwnProperty.call(kernel, 'requestExecute');
    const original = kernel.requestExecute;
    const model = this._model;
    const wrapper: RequestExecute = function (this: unknown, content, disposeOnDone, metadata) {
      return original.call(kernel, content, disposeOnDone, announce(model(), metadata));
    };
    kernel.requestExecute = wrapper;
    this._wrapped = { kernel, original, wrapper, ownProperty };
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

  private _wrapped: IWrapped | null = null;
  private _isDisposed = false;
}
