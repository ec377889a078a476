/**
 * Once model-written code ran in a kernel, none of its outputs runs script in this page until
 * the kernel restarts; a sandboxed kernel's outputs never do.
 *
 * Code a step runs can leave hooks in its kernel (an IPython `post_run_cell` callback, an
 * HTML formatter, a patched `_repr_html_`, `sys.displayhook`) that put script into the
 * outputs of the user's own later cells, and JupyterLab trusts every cell it runs. So each
 * kernel has a state here, and TrustGuard (trust.ts) withdraws the trust a run gives a cell
 * while its kernel's state is not `clean`. The server keeps the marks
 * (server/broker/model_code.py): the kernel tells it before its first step, and so does this
 * page when it sees an ask start or runs an ask's, a generated or an agent's cell. A page
 * that loads, reconnects or sees a restart asks the server, and trusts none of the kernel's
 * outputs until it has the answer. Only the server forgets a mark (a restart is a new
 * process): a status message saying "restarting" could come from the kernel itself.
 */
import type { ISessionContext } from '@jupyterlab/apputils';
import type { Kernel } from '@jupyterlab/services';
import type { IDisposable } from '@lumino/disposable';
import { ISignal, Signal } from '@lumino/signaling';

import { IKernelMarks, kernelMarks } from './api';
import { KernelFollower } from './kernelfollower';

/** What this page holds of a kernel's outputs. */
export type KernelState = 'clean' | 'model_code' | 'sandboxed' | 'unknown';

/** How the page reaches the server's marks (api.ts; replaced in tests). */
export type MarksFetch = (
  kernelId: string,
  method: 'GET' | 'POST'
) => Promise<IKernelMarks | null>;

/** Seconds before asking again a server that could not answer. */
const RETRY_MS = 3000;
/** Answers to wait for at most, for one kernel, before it stays unknown. */
const MAX_RETRIES = 5;
/** Statuses after which the kernel may be a new process: the server is asked again. */
const RESTARTS = new Set<Kernel.Status>(['restarting', 'autorestarting']);

/** The page's account of which kernels ran model-written code, kept with the server's. */
export class KernelMarks {
  constructor(private readonly _fetch: MarksFetch = kernelMarks) {}

  /** Emits a kernel's id when its state may have changed. */
  get changed(): ISignal<this, string> {
    return this._changed;
  }

  /** Return a kernel's state (`clean` for no kernel). */
  state(kernelId: string | null | undefined): KernelState {
    if (!kernelId) {
      return 'clean';
    }
    const known = this._server.get(kernelId);
    if (known?.sandboxed) {
      return 'sandboxed';
    }
    if (this._seen.has(kernelId) || known?.model_code) {
      return 'model_code';
    }
    return known === undefined ? 'unknown' : 'clean';
  }

  /** Model-written code runs in this kernel from now: hold it here, and tell the server. */
  mark(kernelId: string): void {
    if (this._seen.has(kernelId) && this._server.get(kernelId)?.model_code) {
      return; // both know already (Run All of a notebook full of generated cells)
    }
    if (!this._seen.has(kernelId)) {
      this._seen.add(kernelId);
      this._changed.emit(kernelId);
    }
    const ask = this._next(kernelId);
    this._fetch(kernelId, 'POST').then(
      found => this._learn(kernelId, ask, found),
      () => undefined // the page's own mark holds; the next refresh asks again
    );
  }

  /**
   * Ask the server what it knows of a kernel; its outputs are untrusted until it answers.
   * `restarted`: the kernel may be a new process, so what this page saw of it is forgotten.
   */
  refresh(kernelId: string, restarted = false, retries = 0): void {
    if (restarted) {
      this._seen.delete(kernelId);
    }
    this._server.delete(kernelId);
    this._changed.emit(kernelId);
    const ask = this._next(kernelId);
    this._fetch(kernelId, 'GET').then(
      found => this._learn(kernelId, ask, found),
      () => {
        if (retries < MAX_RETRIES && this._asks.get(kernelId) === ask) {
          setTimeout(() => {
            if (this._asks.get(kernelId) === ask) {
              this.refresh(kernelId, false, retries + 1);
            }
          }, RETRY_MS);
        }
      }
    );
  }

  private _next(kernelId: string): number {
    const ask = (this._asks.get(kernelId) ?? 0) + 1;
    this._asks.set(kernelId, ask);
    return ask;
  }

  /** Keep the server's answer to the latest question about this kernel. */
  private _learn(kernelId: string, ask: number, found: IKernelMarks | null): void {
    if (this._asks.get(kernelId) !== ask) {
      return; // a later question is on its way
    }
    // No route (the server extension is off): the page knows only what it saw.
    this._server.set(kernelId, found ?? { model_code: false, sandboxed: false });
    this._changed.emit(kernelId);
  }

  private readonly _changed = new Signal<this, string>(this);
  /** What the server said, by kernel; absent while unknown. */
  private readonly _server = new Map<string, IKernelMarks>();
  /** Kernels this page saw run model-written code since it last heard of a restart. */
  private readonly _seen = new Set<string>();
  /** The number of the latest question about each kernel: only its answer counts. */
  private readonly _asks = new Map<string, number>();
}

/**
 * Keep the marks of a session's kernel current: asked when it connects, and again when it
 * restarts (at the restart, and once it is idle again, when the server has seen it).
 */
export class KernelMarksFollower implements IDisposable {
  constructor(session: ISessionContext, marks: KernelMarks) {
    let restarting = false;
    this._follower = new KernelFollower(session, {
      attach: kernel => marks.refresh(kernel.id),
      detach: () => undefined,
      status: (kernel, status) => {
        if (RESTARTS.has(status)) {
          restarting = true;
          marks.refresh(kernel.id, true);
        } else if (status === 'idle' && restarting) {
          restarting = false;
          marks.refresh(kernel.id);
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

  private readonly _follower: KernelFollower;
}
