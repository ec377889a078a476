/**
 * Receive the `jupyter_ci` comms of one notebook's kernel and dispatch their messages.
 */
import type { ISessionContext } from '@jupyterlab/apputils';
import type { Cell, ICodeCellModel } from '@jupyterlab/cells';
import { NotebookActions } from '@jupyterlab/notebook';
import type { INotebookModel } from '@jupyterlab/notebook';
import type { Kernel, KernelMessage as KM } from '@jupyterlab/services';
import type { IDisposable } from '@lumino/disposable';

import { AskCells } from './askcells';
import type { Conversation } from './conversation';
import { KernelFollower } from './kernelfollower';
import { ExternalCell, parseExternal, samePath } from './externalcells';
import { ensureLoadCell } from './loader';
import { deleteAskCells, findCell, pinCell } from './notebookcells';
import {
  AnyMessage,
  COMM_TARGET,
  errorText,
  IAskEnd,
  IAskReused,
  IAskStart,
  IAskState,
  isKnown,
  parseMessage
} from './protocol';
import type { KernelMarks } from './outputtrust';
import type { NotebookQuestions } from './questions';
import type { TrustGuard } from './trust';

const LOST_STATUSES = new Set<Kernel.Status>(['restarting', 'autorestarting', 'dead']);

/**
 * Keeps a `jupyter_ci` comm target registered on a notebook's current kernel
 * and applies each ask message to that notebook (and no other).
 *
 * Several notebooks may share one kernel; each has its own kernel connection
 * and receives every comm, so an ask whose `%%ask` cell is not in this
 * notebook is ignored here (and the comm left open for the notebook it
 * belongs to).
 */
export class NotebookComm implements IDisposable {
  constructor(
    private readonly _session: ISessionContext,
    private readonly _model: () => INotebookModel | null,
    private readonly _conversation: Conversation,
    private readonly _trust: TrustGuard | null = null,
    private readonly _reveal: ((cellId: string) => void) | null = null,
    private readonly _questions: NotebookQuestions | null = null,
    private readonly _marks: KernelMarks | null = null
  ) {
    this._follower = new KernelFollower(_session, {
      changed: () => this._lose('The kernel changed before the ask finished.'),
      // Comm targets survive restarts of the same kernel connection.
      attach: kernel => kernel.registerCommTarget(COMM_TARGET, this._onCommOpen),
      detach: kernel => {
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
    this._asks.clear();
    this._counts.clear();
    this._ended.clear();
  }

  /**
   * Give an `%%ask` cell back its own execution count once its reply is in:
   * the reply reports the count of the last generated cell, which ran inside it.
   */
  private _onExecuted(_: unknown, args: { cell: Cell }): void {
    const count = this._counts.get(args.cell.model.id);
    if (count === undefined) {
      return;
    }
    this._counts.delete(args.cell.model.id);
    const cell = args.cell.model;
    if (cell.type === 'code') {
      (cell as ICodeCellModel).executionCount = count;
    }
  }

  private _onStatus(status: Kernel.Status): void {
    if (LOST_STATUSES.has(status)) {
      const reason =
        status === 'dead'
          ? 'The kernel died before the ask finished.'
          : 'The kernel restarted before the ask finished.';
      this._lose(reason);
    }
  }

  private readonly _onCommOpen = (comm: Kernel.IComm, msg: KM.ICommOpenMsg): void => {
    // An ask (or an agent's cell) in this kernel, now or before: model-written code runs
    // there, whichever notebook it belongs to (outputtrust.ts).
    const kernel = this._follower.kernel;
    if (kernel !== null) {
      this._marks?.mark(kernel.id);
    }
    if (this._external(comm, msg.content.data)) {
      return;
    }
    const open = parseMessage(msg.content.data);
    if (open !== null && isKnown(open) && open.type === 'ask_state') {
      this._resume(open); // a one-shot comm: the ask itself goes on on its own comm
      return;
    }
    const askId = open?.ask_id ?? null;
    if (open !== null) {
      this._handle(open);
    }
    this._listen(comm, askId);
  };

  /**
   * Show an MCP client's code as a new last cell of this notebook, when it is the notebook
   * the server named (externalcells.ts); the kernel runs it only after this page's answer.
   */
  private _external(comm: Kernel.IComm, data: unknown): boolean {
    const external = parseExternal(data);
    if (external === null) {
      return false;
    }
    const model = this._model();
    const kernel = this._follower.kernel;
    if (model !== null && kernel !== null && samePath(external.path, this._session.path)) {
      new ExternalCell(model, kernel, comm, external, this._trust);
    }
    return true;
  }

  /** Apply the messages of an ask's comm; when it closes without an end, abandon the ask. */
  private _listen(comm: Kernel.IComm, askId: string | null): void {
    comm.onMsg = (m: KM.ICommMsgMsg) => {
      const message = parseMessage(m.content.data);
      if (message !== null) {
        this._handle(message);
      }
    };
    comm.onClose = (m: KM.ICommCloseMsg) => {
      const message = parseMessage(m.content.data);
      if (message !== null) {
        this._handle(message);
      }
      const cells = askId === null ? undefined : this._asks.get(askId);
      if (askId !== null && cells !== undefined) {
        this._conversation.abandon(askId, 'The kernel closed the ask without an answer.');
        cells.settle();
        this._forget(askId);
      }
    };
  }

  /**
   * Catch up with an ask this page missed the start of (the page was reloaded mid-ask, or
   * the notebook opened in a second tab): rebuild its cells from the kernel's account and
   * follow the rest on the ask's own comm. The ask belongs here when its `%%ask` cell is
   * here or, when that cell was never saved, when the notebook path is the one it ran from.
   */
  private _resume(state: IAskState): void {
    const model = this._model();
    const start = state.messages[0];
    if (
      model === null ||
      this._asks.has(state.ask_id) ||
      this._ended.has(state.ask_id) ||
      start === undefined ||
      !isKnown(start) ||
      start.type !== 'ask_start'
    ) {
      return;
    }
    const here = state.cell_id !== null && findCell(model, state.cell_id) !== null;
    if (!here && (state.notebook === null || state.notebook !== this._session.path)) {
      return;
    }
    if (start.cell_id === null) {
      return; // an ask no cell asked (a request without a cell id): nothing to show here
    }
    // Steps saved mid-ask come again in the replay, with their outputs as they are now.
    deleteAskCells(model, state.ask_id, start.cell_id);
    this._guard(model, start.cell_id);
    const cells = new AskCells(
      model, state.ask_id, start.cell_id, start.model, start.prompt, this._trust
    );
    cells.resume(state.log);
    this._asks.set(state.ask_id, cells);
    this._conversation.start(start);
    for (const message of state.messages.slice(1)) {
      this._handle(message);
    }
    const kernel = this._follower.kernel;
    if (state.live && kernel !== null && !kernel.isDisposed && !kernel.hasComm(state.comm_id)) {
      // Not opened from here: the kernel's messages on this comm id now reach us.
      this._listen(kernel.createComm(COMM_TARGET, state.comm_id), state.ask_id);
    }
  }

  private _handle(msg: AnyMessage): void {
    if (!isKnown(msg) || msg.type === 'ask_state') {
      return; // an event of a newer kernel; ask_state is only a comm's open data
    }
    if (msg.type === 'ask_start') {
      this._start(msg);
      return;
    }
    if (msg.type === 'ask_reused') {
      this._reused(msg);
      return;
    }
    const cells = this._asks.get(msg.ask_id);
    if (cells === undefined) {
      return; // not an ask of this notebook
    }
    // A step or plan waiting for approval is shown with its buttons (questions.ts).
    this._questions?.follow(msg, cells);
    if (msg.type === 'ask_end') {
      this._end(cells, msg);
      return;
    }
    cells.apply(msg);
    this._conversation.follow(msg);
  }

  /** A re-run reused its answer: show it, and give the cell the pin and load cell it lacks. */
  private _reused(msg: IAskReused): void {
    const model = this._model();
    const cell = model === null || msg.cell_id === null ? null : findCell(model, msg.cell_id);
    if (model !== null && cell !== null) {
      this._conversation.reused(msg);
      // A notebook answered before pins (and load cells) existed gets them at its next reuse.
      pinCell(cell, msg.pin);
      ensureLoadCell(model);
    }
  }

  /** Write the ask's record (and pin) into its `%%ask` cell and settle its cells. */
  private _end(cells: AskCells, msg: IAskEnd): void {
    cells.writeRecord(msg.record);
    if (msg.status === 'done') {
      cells.writePin(msg.pin);
      this._ensureLoadCell();
    }
    cells.showAnswer(msg.answer || errorText(msg.error) || '');
    if (msg.status === 'interrupted') {
      cells.markInterrupted();
    }
    cells.settle();
    this._conversation.end(msg);
    this._forget(msg.ask_id);
  }

  /** The ask is over here: its later ask_state is old news. */
  private _forget(askId: string): void {
    this._asks.delete(askId);
    this._ended.add(askId);
  }

  private _start(msg: IAskStart): void {
    const model = this._model();
    if (model === null || msg.cell_id === null || findCell(model, msg.cell_id) === null) {
      return; // the %%ask cell lives in another notebook on this kernel (or none named it)
    }
    if (msg.replace_ask_id) {
      deleteAskCells(model, msg.replace_ask_id, msg.cell_id);
    }
    // Before any step runs: what the model's code publishes here must not run script.
    this._guard(model, msg.cell_id);
    const cells = new AskCells(
      model, msg.ask_id, msg.cell_id, msg.model, msg.prompt, this._trust
    );
    if (this._conversation.isPending(msg.cell_id)) {
      cells.reveal = this._reveal; // sent from the panel: its steps scroll into view
    }
    this._asks.set(msg.ask_id, cells);
    if (typeof msg.execution_count === 'number') {
      this._counts.set(msg.cell_id, msg.execution_count);
    }
    this._conversation.start(msg);
  }

  /** Let runners without the labextension load the magics too (loader.ts). */
  private _ensureLoadCell(): void {
    const model = this._model();
    if (model !== null) {
      ensureLoadCell(model);
    }
  }

  /** Keep the `%%ask` cell of an ask untrusted from now on. */
  private _guard(model: INotebookModel, cellId: string): void {
    const cell = findCell(model, cellId);
    if (cell !== null) {
      this._trust?.guard(cell);
    }
  }

  /** End the running asks: their cells stay, marked interrupted. */
  private _lose(reason: string): void {
    for (const cells of this._asks.values()) {
      cells.markInterrupted();
    }
    this._asks.clear();
    this._conversation.kernelLost(reason);
  }

  private readonly _follower: KernelFollower;
  private readonly _asks = new Map<string, AskCells>();
  private readonly _counts = new Map<string, number>();
  /** Asks that ended here: their last ask_state is old news. */
  private readonly _ended = new Set<string>();
  private _isDisposed = false;
}
