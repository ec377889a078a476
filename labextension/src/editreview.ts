/**
 * Review the edits the model proposes for the user's own cells (a waiting_for_user of kind
 * "edits"): each target cell shows the diff with Accept / Reject, the `%%ask` cell and the
 * panel Accept all / Reject all. Nothing is applied silently: Accept sets the cell's source
 * (it does not run it) and offers Undo; Reject touches nothing. Once every edit of the batch
 * is decided, the kernel's stdin question gets `{"decisions": {call_id: ...}}`.
 *
 * What was proposed and decided lives in the conversation (editstate.ts), so the panel
 * shows it too; this class does what the decisions say, to the notebook and the kernel.
 */
import type { Cell } from '@jupyterlab/cells';
import type {
  INotebookModel,
  INotebookTracker,
  Notebook,
  NotebookPanel
} from '@jupyterlab/notebook';
import type { IDisposable } from '@lumino/disposable';

import type { IAskView } from './askview';
import type { Conversation } from './conversation';
import {
  answerText,
  decide,
  editsOf,
  IEditReview,
  isDecided,
  openReview
} from './editstate';
import { findCell } from './notebookcells';
import { CellBox, IReviewActions, IShownEdit, renderEdits, renderReviewBar } from './reviewbox';
import { hideStdinBoxes, StdinAnswers } from './stdinreply';

/** The reviewer of each conversation, for the panel's buttons. */
const REVIEWERS = new WeakMap<Conversation, EditReviewer>();

/** The review actions of a notebook's conversation (null before its notebook is managed). */
export function reviewerOf(conversation: Conversation | null): IReviewActions | null {
  return conversation === null ? null : REVIEWERS.get(conversation) ?? null;
}

/** When to look again for a Stdin box that JupyterLab may not have shown yet (ms). */
const BOX_TRIES = [0, 100, 500, 2000];

/** The boxes placed in one cell widget. */
interface ICellBoxes {
  edits?: CellBox;
  bar?: CellBox;
}

/** The open review of a running ask. */
function openOf(ask: IAskView | undefined): IEditReview | null {
  return ask?.status === 'running' ? openReview(ask.reviews) : null;
}

export class EditReviewer implements IReviewActions, IDisposable {
  constructor(
    private readonly _model: () => INotebookModel | null,
    private readonly _conversation: Conversation,
    private readonly _stdin: StdinAnswers,
    private readonly _views: () => Notebook[]
  ) {
    REVIEWERS.set(_conversation, this);
    _conversation.changed.connect(this._schedule, this);
    _stdin.requested.connect(this._onRequested, this);
    this._schedule();
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  /** Called once when disposed (to let go of what it was given). */
  disposed: (() => void) | null = null;

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this.disposed?.();
    REVIEWERS.delete(this._conversation);
    this._conversation.changed.disconnect(this._schedule, this);
    this._stdin.requested.disconnect(this._onRequested, this);
  }

  /** Accept one undecided edit (`callId`) or all of them (null): their cells get the new source. */
  accept(askId: string, callId: string | null): void {
    const review = openOf(this._ask(askId));
    const model = this._model();
    if (review === null || model === null) {
      return;
    }
    this._conversation.update(askId, () => {
      for (const edit of decide(review, callId, 'accepted')) {
        const cell = findCell(model, edit.cellId);
        if (cell === null) {
          edit.decision = 'rejected'; // the cell is gone: there is nothing to apply it to
          continue;
        }
        edit.before = cell.sharedModel.getSource();
        cell.sharedModel.setSource(edit.new);
        this._undoable.add(edit.callId);
      }
      this._answerIfDecided(review);
    });
  }

  /** Reject one undecided edit (`callId`) or all of them (null): their cells stay as they are. */
  reject(askId: string, callId: string | null): void {
    const review = openOf(this._ask(askId));
    if (review !== null) {
      this._conversation.update(askId, () => {
        decide(review, callId, 'rejected');
        this._answerIfDecided(review);
      });
    }
  }

  /**
   * Put back the source a cell had before its edit was accepted. Before the batch's answer
   * went, the edit is undecided again; after, it stays accepted for the kernel, undone here.
   */
  undo(askId: string, callId: string): void {
    const ask = this._ask(askId);
    const review = ask?.reviews?.find(r => r.edits.some(e => e.callId === callId));
    const edit = review?.edits.find(e => e.callId === callId);
    const model = this._model();
    if (review === undefined || edit === undefined || edit.decision !== 'accepted' || edit.undone) {
      return;
    }
    this._conversation.update(askId, () => {
      const cell = model === null ? null : findCell(model, edit.cellId);
      cell?.sharedModel.setSource(edit.before ?? edit.old);
      this._undoable.delete(callId);
      if (review.state === 'open') {
        edit.decision = null;
        delete edit.before;
      } else {
        edit.undone = true;
      }
    });
  }

  keep(callId: string): void {
    if (this._undoable.delete(callId)) {
      this._schedule();
    }
  }

  private _answerIfDecided(review: IEditReview): void {
    if (review.state === 'open' && isDecided(review)) {
      review.state = 'answered';
      const answer = answerText(review);
      if (!this._stdin.reply(review.question, answer)) {
        this._unsent.set(review.question, answer); // its input_request has not come yet
      }
      this._hideBoxes(review.question);
    }
  }

  private _ask(askId: string): IAskView | undefined {
    return this._conversation.asks.find(ask => ask.askId === askId);
  }

  /**
   * A question came on stdin: an answer decided before it came goes now; an open review
   * answers it here, not in its box.
   */
  private _onRequested(_: StdinAnswers, prompt: string): void {
    const answer = this._unsent.get(prompt);
    if (answer !== undefined) {
      this._unsent.delete(prompt);
      this._stdin.reply(prompt, answer);
      this._hideBoxes(prompt);
    } else if (this._conversation.asks.some(ask => openOf(ask)?.question === prompt)) {
      this._hideBoxes(prompt);
    }
  }

  private _hideBoxes(prompt: string): void {
    for (const delay of BOX_TRIES) {
      window.setTimeout(() => {
        for (const view of this._views()) {
          hideStdinBoxes(view.node, prompt);
        }
      }, delay);
    }
  }

  private _schedule(): void {
    if (!this._scheduled && !this._isDisposed) {
      this._scheduled = true;
      requestAnimationFrame(() => {
        this._scheduled = false;
        this._render();
      });
    }
  }

  /** Show every review where it belongs, in every view of the notebook. */
  private _render(): void {
    if (this._isDisposed) {
      return;
    }
    this._noticeNewReviews();
    const reviewing = this._conversation.asks.some(ask => (ask.reviews?.length ?? 0) > 0);
    if (!reviewing && !this._placed) {
      return; // nothing to show, nothing to take away: typing stays cheap
    }
    this._placed = reviewing;
    for (const view of this._views()) {
      this._watch(view);
      for (const cell of view.widgets) {
        this._renderCell(cell);
      }
    }
  }

  /** A new batch of edits: an answer left from an earlier one with its question is stale. */
  private _noticeNewReviews(): void {
    for (const ask of this._conversation.asks) {
      const review = openOf(ask);
      if (review !== null && !this._seen.has(review)) {
        this._seen.add(review);
        this._unsent.delete(review.question);
        if (this._stdin.waits(review.question)) {
          this._hideBoxes(review.question);
        }
      }
    }
  }

  private _renderCell(cell: Cell): void {
    const boxes = this._boxes.get(cell) ?? {};
    const id = cell.model.id;
    const edits = this._shownEdits(id, cell.model.sharedModel.getSource());
    boxes.edits = this._sync(cell, boxes.edits, 'edit-review', edits.length > 0, host =>
      renderEdits(host, edits, this)
    );
    const asking = this._conversation.asks.find(ask => ask.cellId === id && openOf(ask) !== null);
    const review = openOf(asking);
    boxes.bar = this._sync(cell, boxes.bar, 'review-area', review !== null, host => {
      if (asking?.askId && review !== null) {
        renderReviewBar(host, asking.askId, review, this);
      }
    });
    this._boxes.set(cell, boxes);
  }

  /** The edits a cell shows: those of open reviews, and accepted ones it can still undo. */
  private _shownEdits(cellId: string, source: string): IShownEdit[] {
    const shown: IShownEdit[] = [];
    for (const ask of this._conversation.asks) {
      if (ask.askId === null) {
        continue;
      }
      const open = openOf(ask);
      for (const edit of editsOf(ask.reviews ?? [], cellId)) {
        const isOpen = open !== null && open.edits.includes(edit);
        const undoable =
          edit.decision === 'accepted' && !edit.undone && this._undoable.has(edit.callId);
        if (isOpen || (undoable && source === edit.new)) {
          const stale = edit.decision === null && source !== edit.old;
          shown.push({ askId: ask.askId, edit, open: isOpen, stale });
        }
      }
    }
    return shown;
  }

  /** Keep a cell's box: filled when `show`, else removed. */
  private _sync(
    cell: Cell,
    box: CellBox | undefined,
    part: string,
    show: boolean,
    fill: (host: HTMLElement) => void
  ): CellBox | undefined {
    if (!show) {
      box?.dispose();
      return undefined;
    }
    if (box === undefined || box.isDisposed) {
      box = new CellBox(part);
      if (!box.placeIn(cell)) {
        box.dispose();
        return undefined;
      }
    }
    fill(box.node);
    return box;
  }

  /** Render again when a view's cells change (a moved cell gets a new widget). */
  private _watch(view: Notebook): void {
    if (!this._watched.has(view) && view.model !== null) {
      this._watched.add(view);
      view.model.cells.changed.connect(this._schedule, this);
      view.model.contentChanged.connect(this._schedule, this);
    }
  }

  private readonly _boxes = new WeakMap<Cell, ICellBoxes>();
  private readonly _watched = new WeakSet<Notebook>();
  private readonly _seen = new WeakSet<IEditReview>();
  /** Answers decided before their input_request came, by question. */
  private readonly _unsent = new Map<string, string>();
  /** Edits accepted in this page, which it can undo. */
  private readonly _undoable = new Set<string>();
  private _scheduled = false;
  /** Whether the last render may have left boxes in cells. */
  private _placed = false;
  private _isDisposed = false;
}

/** Review the edits proposed in the notebook of `panel`, in every view of it `tracker` has. */
export function reviewEdits(
  tracker: INotebookTracker,
  panel: NotebookPanel,
  conversation: Conversation
): EditReviewer {
  const context = panel.context;
  const stdin = new StdinAnswers(panel.sessionContext);
  const views = (): Notebook[] =>
    tracker.filter(view => view.context === context && !view.isDisposed).map(view => view.content);
  const reviewer = new EditReviewer(
    () => (context.isDisposed ? null : context.model),
    conversation,
    stdin,
    views
  );
  reviewer.disposed = () => stdin.dispose();
  return reviewer;
}
