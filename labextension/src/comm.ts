/**
 * Receive the `jupyter_ci` comms of one notebook's kernel and dispatch their messages.
 */
import type { ISessionContext } from '@jupyterlab/apputils';
import type { Cell, ICodeCellModel } from '@jupyterlab/cells';
import { NotebookActions } from '@jupyterlab/notebook';
import type { INotebookModel } from '@jupyterlab/notebook';
import type { Kernel, KernelMessage as KM } from '@jupyterlab/services';
import type { IDisposable } from '@lumino/disposable';

import { AskCells, deleteAskCells, findCell, pinCell } from './cells';
import type { Conversation } from './conversation';
import { COMM_TARGET, IAskStart, KernelMessage, parseMessage } from './protocol';

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
    private readonly _conversation: Conversation
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
    const askId = open?.ask_id ?? null;
    if (open !== null) {
      this._handle(open);
    }
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
      }
    };
  };

  private _handle(msg: KernelMessage): void {
    if (msg.type === 'ask_start') {
      this._start(msg);
      return;
    }
    if (msg.type === 'ask_reused') {
      const model = this._model();
      const cell = model === null ? null : findCell(model, msg.cell_id);
      if (cell !== null) {
        this._conversation.reused(msg);
        // A notebook answered before pins existed gets one at its next reuse.
        pinCell(cell, msg.pin);
      }
      return;
    }
    const cells = this._asks.get(msg.ask_id);
    if (cells === undefined) {
      return; // not an ask of this notebook
    }
    switch (msg.type) {
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
      case 'ask_end':
        cells.writeRecord(msg.record);
        if (msg.status === 'done') {
          cells.writePin(msg.pin);
        }
        cells.showAnswer(msg.answer || msg.error || '');
        if (msg.status === 'interrupted') {
          cells.markInterrupted();
        }
        cells.settle();
        this._conversation.end(msg);
        this._asks.delete(msg.ask_id);
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
    this._asks.set(msg.ask_id, new AskCells(model, msg.ask_id, msg.cell_id, msg.model, msg.prompt));
    if (typeof msg.execution_count === 'number') {
      this._counts.set(msg.cell_id, msg.execution_count);
    }
    this._conversation.start(msg);
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
  private _isDisposed = false;
}
