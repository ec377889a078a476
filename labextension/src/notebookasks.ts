/**
 * The asks of one notebook: each one's cells, its entry in the side panel, its end.
 *
 * comm.ts hands over each ask message of the notebook's kernel. Every page follows every ask
 * in its panel; the cells are written by one page only when the notebook is shared
 * (askwriters.ts), and a page that starts writing an ask late (its writer went away, or it
 * opened mid-ask) rebuilds the ask's cells from the kernel's account of it first.
 */
import type { Cell, ICodeCellModel } from '@jupyterlab/cells';
import type { INotebookModel } from '@jupyterlab/notebook';
import type { IDisposable } from '@lumino/disposable';

import { AskCells } from './askcells';
import type { AskWriters } from './askwriters';
import type { Conversation } from './conversation';
import { ensureLoadCell } from './loader';
import { deleteAskCells, findCell, pinCell } from './notebookcells';
import {
  AnyMessage,
  errorText,
  IAskEnd,
  IAskReused,
  IAskStart,
  IAskState,
  isKnown
} from './protocol';
import type { NotebookQuestions } from './questions';
import type { TrustGuard } from './trust';

/** What shows an ask of this notebook: the panel, the questions, the cells' trust. */
export interface IAskViews {
  conversation: Conversation;
  trust: TrustGuard | null;
  reveal: ((cellId: string) => void) | null;
  questions: NotebookQuestions | null;
}

/** An ask under way here. */
interface IFollowedAsk {
  cells: AskCells;
  /** The kernel's last account of the ask, and the messages since: what a takeover replays. */
  replay: AnyMessage[];
  /** The `%%ask` cell's log in that account. */
  log: string[];
  /** This page saw the ask start (it did not open mid-ask). */
  sawStart: boolean;
}

/** What the `%%ask` cell says when this page takes over an ask it saw start. */
const TAKEN_OVER = '(Running in the kernel; the page that ran it went away, so this page shows it now.)';

/** The asks of one notebook model, as this page follows (and maybe writes) them. */
export class NotebookAsks implements IDisposable {
  constructor(
    private readonly _model: () => INotebookModel | null,
    private readonly _views: IAskViews,
    private readonly _writers: AskWriters,
    private readonly _path: () => string
  ) {
    _writers.tookOver.connect(this._onTookOver, this);
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this._writers.tookOver.disconnect(this._onTookOver, this);
    this._asks.clear();
    this._counts.clear();
    this._ended.clear();
  }

  /** Tell whether an ask is followed here. */
  has(askId: string): boolean {
    return this._asks.has(askId);
  }

  /** An ask starts (`origin`: the session that sent its execute_request). */
  start(msg: IAskStart, origin: string | null): void {
    const model = this._model();
    if (model === null || msg.cell_id === null || findCell(model, msg.cell_id) === null) {
      return; // the %%ask cell lives in another notebook on this kernel (or none named it)
    }
    const writes = this._writers.follow(msg.ask_id, origin);
    if (writes && msg.replace_ask_id) {
      deleteAskCells(model, msg.replace_ask_id, msg.cell_id);
    }
    // Before any step runs: what the model's code publishes here must not run script.
    this._guard(model, msg.cell_id);
    const cells = this._newCells(model, msg);
    if (this._views.conversation.isPending(msg.cell_id)) {
      cells.reveal = this._views.reveal; // sent from the panel: its steps scroll into view
    }
    this._asks.set(msg.ask_id, { cells, replay: [msg], log: [], sawStart: true });
    if (typeof msg.execution_count === 'number') {
      this._counts.set(msg.cell_id, msg.execution_count);
    }
    this._views.conversation.start(msg);
  }

  /**
   * Catch up with an ask this page missed the start of (the page was reloaded mid-ask, or
   * the notebook opened in a second tab): follow it, and rebuild its cells from the kernel's
   * account when this page writes them. The ask belongs here when its `%%ask` cell is here
   * or, when that cell was never saved, when the notebook path is the one it ran from.
   */
  resume(state: IAskState, origin: string | null): boolean {
    const followed = this._asks.get(state.ask_id);
    if (followed !== undefined) {
      followed.replay = [...state.messages];
      followed.log = state.log;
      return false;
    }
    const model = this._model();
    const start = state.messages[0];
    if (model === null || this._ended.has(state.ask_id) || !isStart(start)) {
      return false;
    }
    const here = state.cell_id !== null && findCell(model, state.cell_id) !== null;
    if (!here && (state.notebook === null || state.notebook !== this._path())) {
      return false;
    }
    if (start.cell_id === null) {
      return false; // an ask no cell asked (a request without a cell id): nothing to show here
    }
    const followedAsk: IFollowedAsk = {
      cells: this._newCells(model, start),
      replay: [...state.messages],
      log: state.log,
      sawStart: false
    };
    this._asks.set(state.ask_id, followedAsk);
    this._views.conversation.start(start);
    for (const message of state.messages.slice(1)) {
      this._views.conversation.follow(message);
    }
    if (this._writers.follow(state.ask_id, origin)) {
      this._rebuild(state.ask_id, followedAsk);
    }
    return true;
  }

  /** Apply a message of an ask under way. */
  handle(msg: AnyMessage): void {
    if (!isKnown(msg) || msg.type === 'ask_state' || msg.type === 'ask_reused') {
      return; // an event of a newer kernel; the others are comm.ts's
    }
    if (msg.type === 'ask_start') {
      return; // only a comm's open data starts an ask
    }
    const followed = this._asks.get(msg.ask_id);
    if (followed === undefined) {
      return; // not an ask of this notebook
    }
    followed.replay.push(msg);
    const writes = this._writers.writes(msg.ask_id);
    if (writes) {
      // A step or plan waiting for approval is shown with its buttons (questions.ts).
      this._views.questions?.follow(msg, followed.cells);
    }
    if (msg.type === 'ask_end') {
      if (!writes && this._writers.writesEnd(msg.ask_id)) {
        this._rebuild(msg.ask_id, followed); // no page wrote it lately: its replay ends here
      } else if (writes) {
        this._writeEnd(followed.cells, msg);
      }
      this._views.conversation.end(msg);
      this._forget(msg.ask_id);
      return;
    }
    if (writes) {
      followed.cells.apply(msg);
    }
    this._views.conversation.follow(msg);
  }

  /** A re-run reused its answer: show it, and give the cell the pin and load cell it lacks. */
  reused(msg: IAskReused, origin: string | null): void {
    const model = this._model();
    const cell = model === null || msg.cell_id === null ? null : findCell(model, msg.cell_id);
    if (model !== null && cell !== null) {
      this._views.conversation.reused(msg);
      if (this._writers.writesNow(origin)) {
        // A notebook answered before pins (and load cells) existed gets them at its next reuse.
        pinCell(cell, msg.pin);
        ensureLoadCell(model);
      }
    }
  }

  /** The ask's comm closed without an end: abandon the ask. */
  closed(askId: string): void {
    const followed = this._asks.get(askId);
    if (followed !== undefined) {
      this._views.conversation.abandon(askId, 'The kernel closed the ask without an answer.');
      if (this._writers.writes(askId)) {
        followed.cells.settle();
      }
      this._forget(askId);
    }
  }

  /**
   * Give an `%%ask` cell back its own execution count once its reply is in:
   * the reply reports the count of the last generated cell, which ran inside it.
   */
  executed(cell: Cell): void {
    const count = this._counts.get(cell.model.id);
    if (count === undefined) {
      return;
    }
    this._counts.delete(cell.model.id);
    if (cell.model.type === 'code') {
      (cell.model as ICodeCellModel).executionCount = count;
    }
  }

  /** End the running asks: their cells stay, marked interrupted. */
  lose(reason: string): void {
    for (const [askId, followed] of this._asks) {
      if (this._writers.writes(askId)) {
        followed.cells.markInterrupted();
      }
      this._writers.forget(askId);
    }
    this._asks.clear();
    this._views.conversation.kernelLost(reason);
  }

  /** This page writes an ask it only followed until now: rebuild its cells first. */
  private _onTookOver(_: AskWriters, askId: string): void {
    const followed = this._asks.get(askId);
    if (followed !== undefined && !this._isDisposed) {
      this._rebuild(askId, followed);
    }
  }

  /**
   * Rebuild an ask's cells from the kernel's account of it and what came since: the cells
   * another page wrote (or a save kept) go, the steps come again with their outputs as they
   * stand, and the `%%ask` cell shows the ask's log (its own output comes to the page that
   * sent it, gone or elsewhere).
   */
  private _rebuild(askId: string, followed: IFollowedAsk): void {
    const model = this._model();
    const start = followed.replay[0];
    if (model === null || !isStart(start) || start.cell_id === null) {
      return;
    }
    deleteAskCells(model, askId, start.cell_id);
    this._guard(model, start.cell_id);
    const cells = this._newCells(model, start);
    followed.cells = cells;
    cells.resume(followed.log, followed.sawStart ? TAKEN_OVER : undefined);
    for (const message of followed.replay.slice(1)) {
      if (!isKnown(message)) {
        continue;
      }
      if (message.type === 'ask_end') {
        this._writeEnd(cells, message);
        return;
      }
      if (message.type !== 'ask_state' && message.type !== 'ask_start' && message.type !== 'ask_reused') {
        cells.apply(message);
      }
    }
  }

  /** Write the ask's record (and pin) into its `%%ask` cell and settle its cells. */
  private _writeEnd(cells: AskCells, msg: IAskEnd): void {
    cells.writeRecord(msg.record);
    if (msg.status === 'done') {
      cells.writePin(msg.pin);
      const model = this._model();
      if (model !== null) {
        ensureLoadCell(model); // runners without the labextension load the magics too
      }
    }
    cells.showAnswer(msg.answer || errorText(msg.error) || '');
    if (msg.status === 'interrupted') {
      cells.markInterrupted();
    }
    cells.settle();
  }

  private _newCells(model: INotebookModel, start: IAskStart): AskCells {
    const { ask_id, cell_id, prompt, execution_count } = start;
    const cells = new AskCells(model, ask_id, cell_id ?? '', start.model, prompt, this._views.trust);
    cells.askCount = typeof execution_count === 'number' ? execution_count : null;
    return cells;
  }

  /** The ask is over here: its later ask_state is old news. */
  private _forget(askId: string): void {
    this._asks.delete(askId);
    this._ended.add(askId);
    this._writers.forget(askId);
  }

  /** Keep the `%%ask` cell of an ask untrusted from now on. */
  private _guard(model: INotebookModel, cellId: string): void {
    const cell = findCell(model, cellId);
    if (cell !== null) {
      this._views.trust?.guard(cell);
    }
  }

  private readonly _asks = new Map<string, IFollowedAsk>();
  private readonly _counts = new Map<string, number>();
  /** Asks that ended here: their last ask_state is old news. */
  private readonly _ended = new Set<string>();
  private _isDisposed = false;
}

function isStart(message: AnyMessage | undefined): message is IAskStart {
  return message !== undefined && isKnown(message) && message.type === 'ask_start';
}
