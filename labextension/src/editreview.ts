/**
 * The answers to a question of kind "edits": the model proposes edits of the user's own
 * cells, each decided here. Nothing is applied silently: Accept sets the cell's source (it
 * does not run it) and offers Undo; Reject touches nothing. Once every edit of the batch is
 * decided, the kernel's stdin question gets `{"decisions": {call_id: ...}}`.
 *
 * What was proposed and decided lives in the conversation (question.ts's IEditReview), so the panel
 * shows it too; this class does what the decisions say, to the notebook and the kernel.
 */
import type { INotebookModel } from '@jupyterlab/notebook';

import type { IAskView } from './askview';
import type { Conversation } from './conversation';
import { findCell } from './notebookcells';
import {
  answerText,
  decide,
  editsOf,
  IEditReview,
  isDecided,
  openReview,
  QuestionReplies
} from './question';
import type { IReviewActions, IShownEdit } from './reviewbox';

/** The open review of a running ask. */
export function openOf(ask: IAskView | undefined): IEditReview | null {
  return ask?.status === 'running' ? openReview(ask.reviews) : null;
}

/** The edit reviews of one notebook document's conversation, and what they do. */
export class EditReviews implements IReviewActions {
  constructor(
    private readonly _model: () => INotebookModel | null,
    private readonly _conversation: Conversation,
    private readonly _replies: QuestionReplies,
    /** Called when something only the cells show changed (an edit kept). */
    private readonly _shown: () => void
  ) {}

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
      this._answerIfDecided(askId, review);
    });
  }

  /** Reject one undecided edit (`callId`) or all of them (null): their cells stay as they are. */
  reject(askId: string, callId: string | null): void {
    const review = openOf(this._ask(askId));
    if (review !== null) {
      this._conversation.update(askId, () => {
        decide(review, callId, 'rejected');
        this._answerIfDecided(askId, review);
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
      this._shown();
    }
  }

  /** Whether an open review asks the question `prompt`. */
  asks(prompt: string): boolean {
    return this._conversation.asks.some(ask => openOf(ask)?.question === prompt);
  }

  /** Whether any ask proposed edits (the cells may show some). */
  get any(): boolean {
    return this._conversation.asks.some(ask => (ask.reviews?.length ?? 0) > 0);
  }

  /** A new batch of edits: an answer left from an earlier one with its question is stale. */
  noticeNew(): void {
    for (const ask of this._conversation.asks) {
      const review = openOf(ask);
      if (review !== null && !this._seen.has(review)) {
        this._seen.add(review);
        this._replies.discard(review.question);
        if (this._replies.waits(review.question)) {
          this._replies.hide(review.question);
        }
      }
    }
  }

  /** The edits a cell shows: those of open reviews, and accepted ones it can still undo. */
  shownIn(cellId: string, source: string): IShownEdit[] {
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

  /** The running ask of the `%%ask` cell `cellId` with its open review, if any. */
  openIn(cellId: string): { askId: string; review: IEditReview } | null {
    for (const ask of this._conversation.asks) {
      const review = ask.cellId === cellId ? openOf(ask) : null;
      if (review !== null && ask.askId !== null) {
        return { askId: ask.askId, review };
      }
    }
    return null;
  }

  private _answerIfDecided(askId: string, review: IEditReview): void {
    if (review.state === 'open' && isDecided(review)) {
      review.state = 'answered';
      this._replies.send(askId, review.question, answerText(review));
    }
  }

  private _ask(askId: string): IAskView | undefined {
    return this._conversation.asks.find(ask => ask.askId === askId);
  }

  private readonly _seen = new WeakSet<IEditReview>();
  /** Edits accepted in this page, which it can undo. */
  private readonly _undoable = new Set<string>();
}
