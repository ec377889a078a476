/**
 * Receive the `jupyter_ci` comms of one notebook's kernel and dispatch their messages.
 */
import type { ISessionContext } from '@jupyterlab/apputils';
import type { Cell } from '@jupyterlab/cells';
import { NotebookActions } from '@jupyterlab/notebook';
import type { INotebookModel } from '@jupyterlab/notebook';
import type { Kernel, KernelMessage as KM } from '@jupyterlab/services';
import type { IDisposable } from '@lumino/disposable';

import { AskWriters } from './askwriters';
import { KernelFollower } from './kernelfollower';
import { ExternalCell, parseExternal, samePath } from './externalcells';
import { IAskViews, NotebookAsks } from './notebookasks';
import { AnyMessage, COMM_TARGET, IAskState, isKnown, parseMessage } from './protocol';
import type { KernelMarks } from './outputtrust';

const LOST_STATUSES = new Set<Kernel.Status>(['restarting', 'autorestarting', 'dead']);

/** The session (kernel connection client id) that sent the request a message answers. */
function originOf(msg: KM.IMessage): string | null {
  const session = (msg.parent_header as Partial<KM.IHeader>).session;
  return typeof session === 'string' && session ? session : null;
}

/**
 * Keeps a `jupyter_ci` comm target registered on a notebook's current kernel
 * and applies each ask message to that notebook (and no other).
 *
 * Several notebooks may share one kernel; each has its own kernel connection
 * and receives every comm, so an ask whose `%%ask` cell is not in this
 * notebook is ignored here (and the comm left open for the notebook it
 * belongs to). Several pages may share one notebook (real-time collaboration):
 * each follows every ask, and one writes its cells (askwriters.ts).
 */
export class NotebookComm implements IDisposable {
  constructor(
    private readonly _session: ISessionContext,
    private readonly _model: () => INotebookModel | null,
    views: IAskViews,
    private readonly _marks: KernelMarks | null = null,
    private readonly _writers: AskWriters = new AskWriters(null)
  ) {
    this._asks = new NotebookAsks(_model, views, _writers, () => _session.path);
    this._trust = views.trust;
    this._follower = new KernelFollower(_session, {
      changed: () => this._asks.lose('The kernel changed before the ask finished.'),
      // Comm targets survive restarts of the same kernel connection.
      attach: kernel => {
        kernel.registerCommTarget(COMM_TARGET, this._onCommOpen);
        _writers.present({ id: kernel.id, clientId: kernel.clientId });
      },
      detach: kernel => {
        _writers.present(null);
        if (!kernel.isDisposed) {
          kernel.removeCommTarget(COMM_TARGET, this._onCommOpen);
        }
      },
      status: (_, status) => this._onStatus(status)
    });
    NotebookActions.executed.connect(this._onExecuted, this);
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this._follower.dispose();
    NotebookActions.executed.disconnect(this._onExecuted, this);
    this._asks.dispose();
    this._writers.dispose();
  }

  private _onExecuted(_: unknown, args: { cell: Cell }): void {
    this._asks.executed(args.cell);
  }

  private _onStatus(status: Kernel.Status): void {
    if (LOST_STATUSES.has(status)) {
      const reason =
        status === 'dead'
          ? 'The kernel died before the ask finished.'
          : 'The kernel restarted before the ask finished.';
      this._asks.lose(reason);
    }
  }

  private readonly _onCommOpen = (comm: Kernel.IComm, msg: KM.ICommOpenMsg): void => {
    // An ask (or an agent's cell) in this kernel, now or before: model-written code runs
    // there, whichever notebook it belongs to (outputtrust.ts).
    const kernel = this._follower.kernel;
    if (kernel !== null) {
      this._marks?.mark(kernel.id);
    }
    const origin = originOf(msg);
    if (this._external(comm, msg.content.data, origin)) {
      return;
    }
    const open = parseMessage(msg.content.data);
    if (open !== null && isKnown(open) && open.type === 'ask_state') {
      this._resume(open, origin); // a one-shot comm: the ask itself goes on on its own comm
      return;
    }
    if (open !== null && isKnown(open) && open.type === 'ask_reused') {
      this._asks.reused(open, origin);
    } else if (open !== null && isKnown(open) && open.type === 'ask_start') {
      this._asks.start(open, origin);
    } else if (open !== null) {
      this._asks.handle(open);
    }
    this._listen(comm, open?.ask_id ?? null);
  };

  /**
   * Show an MCP client's code as a new last cell of this notebook, when it is the notebook
   * the server named (externalcells.ts); the kernel runs it only after this page's answer.
   * Of the pages sharing the notebook, one shows it for all.
   */
  private _external(comm: Kernel.IComm, data: unknown, origin: string | null): boolean {
    const external = parseExternal(data);
    if (external === null) {
      return false;
    }
    const model = this._model();
    const kernel = this._follower.kernel;
    const here = samePath(external.path, this._session.path);
    if (model !== null && kernel !== null && here && this._writers.writesNow(origin)) {
      new ExternalCell(model, kernel, comm, external, this._trust);
    }
    return true;
  }

  /** Apply the messages of an ask's comm; when it closes without an end, abandon the ask. */
  private _listen(comm: Kernel.IComm, askId: string | null): void {
    const apply = (data: unknown): void => {
      const message: AnyMessage | null = parseMessage(data);
      if (message !== null) {
        this._asks.handle(message);
      }
    };
    comm.onMsg = (m: KM.ICommMsgMsg) => apply(m.content.data);
    comm.onClose = (m: KM.ICommCloseMsg) => {
      apply(m.content.data);
      if (askId !== null) {
        this._asks.closed(askId);
      }
    };
  }

  /** Catch up with an ask this page missed the start of (notebookasks.ts), and follow it. */
  private _resume(state: IAskState, origin: string | null): void {
    if (!this._asks.resume(state, origin)) {
      return;
    }
    const kernel = this._follower.kernel;
    if (state.live && kernel !== null && !kernel.isDisposed && !kernel.hasComm(state.comm_id)) {
      // Not opened from here: the kernel's messages on this comm id now reach us.
      this._listen(kernel.createComm(COMM_TARGET, state.comm_id), state.ask_id);
    }
  }

  private readonly _follower: KernelFollower;
  private readonly _asks: NotebookAsks;
  private readonly _trust: IAskViews['trust'];
  private _isDisposed = false;
}
