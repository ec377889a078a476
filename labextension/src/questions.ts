/**
 * The questions of one notebook document's asks, shared by all its views: steps and plans
 * waiting for approval (`waiting_for_user` of kind "step" or "plan"), shown in the cell the
 * step will run in and the plan in the `%%ask` cell, and edits of the user's cells to review
 * (kind "edits", kept in the conversation: editreview.ts). Each view shows them in its cells
 * (questioncells.ts) and the panel beside it (questionview.tsx); the answers go back over
 * the kernel's stdin (question.ts).
 */
import type { ISessionContext } from '@jupyterlab/apputils';
import type { Cell } from '@jupyterlab/cells';
import type {
  INotebookModel,
  INotebookTracker,
  Notebook,
  NotebookPanel
} from '@jupyterlab/notebook';
import type { IDisposable } from '@lumino/disposable';
import { ISignal, Signal } from '@lumino/signaling';

import type { AskCells } from './askcells';
import type { Conversation } from './conversation';
import { EditReviews } from './editreview';
import { findCell } from './notebookcells';
import type { AnyMessage } from './protocol';
import { isKnown } from './protocol';
import {
  ApprovalAction,
  approvalOf,
  IApprovalQuestion,
  IPendingApproval,
  planAnswer,
  QuestionReplies,
  stepAnswer
} from './question';
import { QuestionCells } from './questioncells';

/** The messages after which a question no longer waits (the ask moved on, or ended). */
const MOVED_ON = new Set(['step_start', 'thinking', 'code_preview', 'text', 'ask_end']);

/** The questions of one notebook document, shared by all its views. */
export class NotebookQuestions implements IDisposable {
  constructor(
    session: ISessionContext,
    private readonly _model: () => INotebookModel | null,
    private readonly _views: () => Notebook[],
    readonly conversation: Conversation
  ) {
    const nodes = (): HTMLElement[] => _views().map(view => view.node);
    this._replies = new QuestionReplies(session, nodes, prompt => this._asked(prompt));
    this.edits = new EditReviews(_model, conversation, this._replies, () => this._changed.emit());
    conversation.changed.connect(this._onConversation, this);
  }

  /** The edit reviews of the conversation and their actions. */
  readonly edits: EditReviews;

  /** Emitted when an approval starts or stops waiting, or what a cell shows changes. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** The approval ask `askId` waits on, if any. */
  pending(askId: string | null): IPendingApproval | null {
    return askId === null ? null : (this._pending.get(askId) ?? null);
  }

  /** The approval shown in cell `cellId`, if any. */
  forCell(cellId: string): IPendingApproval | null {
    for (const pending of this._pending.values()) {
      if (pending.cellId === cellId) {
        return pending;
      }
    }
    return null;
  }

  /** Whether the cells may show anything (approvals waiting, edits proposed). */
  get any(): boolean {
    return this._pending.size > 0 || this.edits.any;
  }

  /** Follow an ask's message: show an approval it waits on; drop one it moved past. */
  follow(msg: AnyMessage, cells: AskCells): void {
    if (!isKnown(msg)) {
      return;
    }
    if (msg.type === 'waiting_for_user') {
      const question = approvalOf(msg);
      if (question !== null) {
        this._wait(question, cells);
      }
    } else if (MOVED_ON.has(msg.type)) {
      this._forget(msg.ask_id);
    }
  }

  /**
   * Answer the approval of ask `askId`: run (its code or plan as the user left it), skip
   * (a step) or stop. Returns whether there was such a question.
   */
  answer(askId: string, action: ApprovalAction): boolean {
    const pending = this._pending.get(askId);
    if (pending === undefined) {
      return false;
    }
    const value =
      pending.kind === 'plan'
        ? planAnswer(action === 'skip' ? 'run' : action, pending.plan, pending.draft)
        : stepAnswer(action, pending.code, this._source(pending.cellId) ?? pending.code);
    this._replies.send(askId, pending.question, value);
    this._pending.delete(askId);
    if (action === 'skip' && pending.kind === 'step') {
      this._cells.get(askId)?.dropPending(pending.step);
    }
    this._changed.emit();
    return true;
  }

  /** Let the user edit a waiting step's code in its cell (made editable, focused). */
  edit(askId: string): void {
    const pending = this._pending.get(askId);
    if (pending === undefined || pending.kind !== 'step' || pending.cellId === null) {
      return;
    }
    // A new object: a cell shows each state of its question once (questioncells.ts).
    this._pending.set(askId, { ...pending, editing: true });
    // One editor takes the focus: the view the user sees, else the first one.
    const shows = (view: Notebook) => view.widgets.some(w => w.model.id === pending.cellId);
    const views = this._views().filter(shows);
    const view = views.find(v => v.isVisible) ?? views[0];
    if (view !== undefined) {
      focusEditor(view, view.widgets.findIndex(w => w.model.id === pending.cellId));
    }
    this._changed.emit();
  }

  /** Keep the plan as the user edits it (no change signal: the text box keeps its cursor). */
  setDraft(askId: string, text: string): void {
    const pending = this._pending.get(askId);
    if (pending !== undefined) {
      pending.draft = text;
    }
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this.conversation.changed.disconnect(this._onConversation, this);
    this._replies.dispose();
    this._pending.clear();
    this._cells.clear();
    Signal.clearData(this);
  }

  private _wait(question: IApprovalQuestion, cells: AskCells): void {
    const cellId =
      question.kind === 'step' ? cells.showPending(question.step, question.code) : cells.askCellId;
    const pending = { ...question, cellId, editing: false, draft: question.plan };
    this._pending.set(question.askId, pending);
    this._cells.set(question.askId, cells);
    this._replies.hide(question.question);
    this._changed.emit();
  }

  /** Whether this page shows the question `prompt` now (it answers it, not its box). */
  private _asked(prompt: string): boolean {
    return [...this._pending.values()].some(p => p.question === prompt) || this.edits.asks(prompt);
  }

  private _onConversation(): void {
    this.edits.noticeNew();
    this._changed.emit();
  }

  /** The source of a cell of this notebook, or null. */
  private _source(cellId: string | null): string | null {
    const model = this._model();
    const cell = model === null || cellId === null ? null : findCell(model, cellId);
    return cell === null ? null : cell.sharedModel.getSource();
  }

  /** The ask moved on: its approval (and an answer not sent yet) no longer waits. */
  private _forget(askId: string): void {
    this._replies.forget(askId);
    this._cells.delete(askId);
    if (this._pending.delete(askId)) {
      this._changed.emit();
    }
  }

  private readonly _replies: QuestionReplies;
  private readonly _pending = new Map<string, IPendingApproval>();
  private readonly _cells = new Map<string, AskCells>();
  private readonly _changed = new Signal<this, void>(this);
  private _isDisposed = false;
}

/** The questions of each notebook document, for the panel. */
const QUESTIONS = new WeakMap<object, NotebookQuestions>();

/** The questions of a notebook document (null before it is managed). */
export function questionsOf(document: object | null | undefined): NotebookQuestions | null {
  return document ? (QUESTIONS.get(document) ?? null) : null;
}

/**
 * Show questions in this notebook view: the document's questions (made with its first view)
 * and this view's cells (questioncells.ts), which go with the view.
 */
export function manageQuestions(
  tracker: INotebookTracker,
  panel: NotebookPanel,
  conversation: Conversation
): NotebookQuestions {
  const context = panel.context;
  let questions = QUESTIONS.get(context);
  if (questions === undefined) {
    const views = (): Notebook[] =>
      tracker
        .filter(view => view.context === context && !view.isDisposed)
        .map(view => view.content);
    const model = () => (context.isDisposed ? null : context.model);
    const made = new NotebookQuestions(panel.sessionContext, model, views, conversation);
    QUESTIONS.set(context, made);
    context.disposed.connect(() => {
      QUESTIONS.delete(context);
      made.dispose();
    });
    questions = made;
  }
  const cells = new QuestionCells(panel.content, questions);
  panel.disposed.connect(() => cells.dispose());
  return questions;
}

/** Make the cell at `index` editable, active and in edit mode, its editor focused. */
function focusEditor(view: Notebook, index: number): void {
  const cell: Cell = view.widgets[index];
  cell.readOnly = false;
  view.deselectAll();
  view.activeCellIndex = index;
  void view.scrollToItem(index, 'smart');
  view.mode = 'edit';
  cell.editor?.focus();
}
