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
import { deleteAskCells, findCell, pinCell } from './cells';
import type { Conversation } from './conversation';
import { ensureLoadCell } from './loader';
import { COMM_TARGET, IAskStart, IAskState, KernelMessage, parseMessage } from './protocol';
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
    private readonly _reveal: ((cellId: string) => void) | null = null
  ) {
    _session.kernelChanged.connect(this._onKernelChanged, this);
    NotebookActions.executed.connect(this._onExecuted, this);
    this._attach(_session.session?.kernel ?? null);
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this._attach(null);
    this._session.kernelChanged.disconnect(this._onKernelChanged, this);
    NotebookActions.executed.disconnect(this._onExecuted, this);
    this._asks.clear();
    this._counts.clear();
    this._ended.clear();
  }

  private _onKernelChanged(
    _: ISessionContext,
    change: { newValue: Kernel.IKernelConnection | null }
  ): void {
    this._lose('The kernel changed before the ask finished.');
    this._attach(change.newValue);
  }

  private _attach(kernel: Kernel.IKernelConnection | null): void {
    const old = this._kernel;
    if (old !== null && !old.isDisposed) {
      old.removeCommTarget(COMM_TARGET, this._onCommOpen);
      old.statusChanged.disconnect(this._onStatus, this);
    }
    this._kernel = kernel;
    if (kernel !== null) {
      // Comm targets survive restarts of the same kernel connection.
      kernel.registerCommTarget(COMM_TARGET, this._onCommOpen);
      kernel.statusChanged.connect(this._onStatus, this);
    }
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

  private _onStatus(_: Kernel.IKernelConnection, status: Kernel.Status): void {
    if (LOST_STATUSES.has(status)) {
      const reason =
        status === 'dead'
          ? 'The kernel died before the ask finished.'
          : 'The kernel restarted before the ask finished.';
      this._lose(reason);
    }
  }

  private readonly _onCommOpen = (comm: Kernel.IComm, msg: KM.ICommOpenMsg): void => {
    const open = parseMessage(msg.content.data);
    if (open?.type === 'ask_state') {
      this._resume(open); // a one-shot comm: the ask itself goes on on its own comm
      return;
    }
    const askId = open?.ask_id ?? null;
    if (open !== null) {
      this._handle(open);
    }
    this._listen(comm, askId);
  };

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
      if (askId !== null && this._asks.has(askId)) {
        this._conversation.abandon(askId, 'The kernel closed the ask without an answer.');
        this._asks.get(askId)?.settle();
        this._asks.delete(askId);
        this._ended.add(askId);
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
      start?.type !== 'ask_start'
    ) {
      return;
    }
    const here = state.cell_id !== null && findCell(model, state.cell_id) !== null;
    if (!here && (state.notebook === null || state.notebook !== this._session.path)) {
      return;
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
    const kernel = this._kernel;
    if (state.live && kernel !== null && !kernel.isDisposed && !kernel.hasComm(state.comm_id)) {
      // Not opened from here: the kernel's messages on this comm id now reach us.
      this._listen(kernel.createComm(COMM_TARGET, state.comm_id), state.ask_id);
    }
  }

  private _handle(msg: KernelMessage): void {
    if (msg.type === 'ask_start') {
      this._start(msg);
      return;
    }
    if (msg.type === 'ask_reused') {
      const model = this._model();
      const cell = model === null ? null : findCell(model, msg.cell_id);
      if (model !== null && cell !== null) {
        this._conversation.reused(msg);
        // A notebook answered before pins (and load cells) existed gets them at its next reuse.
        pinCell(cell, msg.pin);
        ensureLoadCell(model);
      }
      return;
    }
    const cells = this._asks.get(msg.ask_id);
    if (cells === undefined) {
      return; // not an ask of this notebook
    }
    switch (msg.type) {
      case 'code_preview':
        cells.preview(msg.step, msg.code);
        this._conversation.writing(msg.ask_id);
        break;
      case 'step_start':
        cells.startStep(msg.step, msg.attempt, msg.code);
        this._conversation.stepStart(msg);
        break;
      case 'output':
        cells.output(msg.step, msg.output);
        break;
      case 'clear_output':
        cells.clearOutput(msg.step, msg.wait);
        break;
      case 'set_outputs':
        cells.setOutputs(msg.step, msg.outputs);
        break;
      case 'step_end':
        cells.endStep(msg);
        this._conversation.stepEnd(msg);
        break;
      case 'answer_delta':
        this._conversation.answerDelta(msg.ask_id, msg.text);
        break;
      case 'context':
        this._conversation.context(msg);
        break;
      case 'ask_end':
        cells.writeRecord(msg.record);
        if (msg.status === 'done') {
          cells.writePin(msg.pin);
          this._ensureLoadCell();
        }
        cells.showAnswer(msg.answer || msg.error || '');
        if (msg.status === 'interrupted') {
          cells.markInterrupted();
        }
        cells.settle();
        this._conversation.end(msg);
        this._asks.delete(msg.ask_id);
        this._ended.add(msg.ask_id);
        break;
    }
  }

  private _start(msg: IAskStart): void {
    const model = this._model();
    if (model === null || findCell(model, msg.cell_id) === null) {
      return; // the %%ask cell lives in another notebook on this kernel
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

  private _kernel: Kernel.IKernelConnection | null = null;
  private readonly _asks = new Map<string, AskCells>();
  private readonly _counts = new Map<string, number>();
  /** Asks that ended here: their last ask_state is old news. */
  private readonly _ended = new Set<string>();
  private _isDisposed = false;
}
