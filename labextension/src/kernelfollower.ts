/**
 * Follow the current kernel of a notebook's session: its connection as it changes (another
 * kernel, a reconnection) and its status (restarts, death). comm.ts and frontend.ts use it.
 */
import type { ISessionContext } from '@jupyterlab/apputils';
import type { Kernel } from '@jupyterlab/services';
import type { IDisposable } from '@lumino/disposable';

/** What a user of the session's kernel does as it comes, goes and changes status. */
export interface IKernelHooks {
  /** Start using this connection (the session's current one, not disposed). */
  attach(kernel: Kernel.IKernelConnection): void;
  /** Stop using a connection attached before (it may be disposed by now). */
  detach(kernel: Kernel.IKernelConnection): void;
  /** The session's kernel is being replaced (by `next`, or none): before detach and attach. */
  changed?(next: Kernel.IKernelConnection | null): void;
  /** The attached kernel's status changed (`restarting`, `dead`, …). */
  status?(kernel: Kernel.IKernelConnection, status: Kernel.Status): void;
}

/**
 * Keeps `hooks` attached to the session's current kernel connection, and only to it, until
 * disposed (then the last one is detached).
 */
export class KernelFollower implements IDisposable {
  constructor(
    private readonly _session: ISessionContext,
    private readonly _hooks: IKernelHooks
  ) {
    _session.kernelChanged.connect(this._onKernelChanged, this);
    this._attach(_session.session?.kernel ?? null);
  }

  /** The connection attached now, if any. */
  get kernel(): Kernel.IKernelConnection | null {
    return this._kernel;
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
    this._attach(null);
  }

  private _onKernelChanged(
    _: ISessionContext,
    change: { newValue: Kernel.IKernelConnection | null }
  ): void {
    this._hooks.changed?.(change.newValue);
    this._attach(change.newValue);
  }

  private _attach(kernel: Kernel.IKernelConnection | null): void {
    const old = this._kernel;
    this._kernel = null;
    if (old !== null) {
      if (!old.isDisposed) {
        old.statusChanged.disconnect(this._onStatus, this);
      }
      this._hooks.detach(old);
    }
    if (kernel !== null && !kernel.isDisposed) {
      this._kernel = kernel;
      kernel.statusChanged.connect(this._onStatus, this);
      this._hooks.attach(kernel);
    }
  }

  private _onStatus(kernel: Kernel.IKernelConnection, status: Kernel.Status): void {
    this._hooks.status?.(kernel, status);
  }

  private _kernel: Kernel.IKernelConnection | null = null;
  private _isDisposed = false;
}
