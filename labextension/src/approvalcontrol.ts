/**
 * Approval of steps and plans in one notebook document: when the kernel waits for it
 * (`waiting_for_user` of kind "step" or "plan"), the step's code is shown in the cell it
 * will run in and the plan in the `%%ask` cell, with their buttons (approvalbar.ts) and in
 * the panel (approvalview.tsx); the user's decision goes back as the reply to the kernel's
 * stdin question (stdinreply.ts), whose Stdin box is hidden. Install questions keep the box.
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

import {
  ApprovalAction,
  approvalOf,
  IApprovalQuestion,
  planAnswer,
  stepAnswer
} from './approval';
import { ApprovalBars } from './approvalbar';
import type { AskCells } from './askcells';
import { findCell } from './notebookcells';
import type { AnyMessage } from './protocol';
import { isKnown } from './protocol';
import { hideStdinBoxes, StdinAnswers } from './stdinreply';

/** A question waiting for the user's decision, and where it is shown. */
export interface IPendingApproval extends IApprovalQuestion {
  /** The cell that shows it: the step's cell, or the `%%ask` cell for a plan. */
  cellId: string | null;
  /** The user asked to edit the step's code (its cell is editable and focused). */
  editing: boolean;
  /** The plan as the user edits it. */
  draft: string;
}

/** How long to look for the Stdin box JupyterLab adds for a question, in frames. */
const HIDE_FRAMES = 120;

/** The messages after which a question no longer waits (the ask moved on, or ended). */
const MOVED_ON = new Set(['step_start', 'thinking', 'code_preview', 'text', 'ask_end']);

/** The approvals of one notebook document, shared by all its views. */
export class NotebookApprovals implements IDisposable {
  constructor(
    session: ISessionContext,
    private readonly _model: () => INotebookModel | null,
    private readonly _views: () => Notebook[]
  ) {
    this._stdin = new StdinAnswers(session);
    this._stdin.requested.connect(this._onRequested, this);
  }

  /** Emitted when a question starts or stops waiting, or its state changes. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** The question ask `askId` waits on, if any. */
  pending(askId: string | null): IPendingApproval | null {
    return askId === null ? null : (this._pending.get(askId) ?? null);
  }

  /** The question shown in cell `cellId`, if any. */
  forCell(cellId: string): IPendingApproval | null {
    for (const pending of this._pending.values()) {
      if (pending.cellId === cellId) {
        return pending;
      }
    }
    return null;
  }

  /** Follow an ask's message: show a question it waits on; drop one it moved past. */
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
   * Answer the question of ask `askId`: run (its code or plan as the user left it), skip
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
    if (!this._stdin.reply(pending.question, value)) {
      // The kernel's request has not come in yet (it comes on another channel): sent then.
      this._queued.set(pending.question, { askId, value });
    }
    this._pending.delete(askId);
    if (action === 'skip' && pending.kind === 'step') {
      this._cells.get(askId)?.dropPending(pending.step);
    }
    this._hide(pending.question);
    this._changed.emit();
    return true;
  }

  /** Let the user edit a waiting step's code in its cell (made editable, focused). */
  edit(askId: string): void {
    const pending = this._pending.get(askId);
    if (pending === undefined || pending.kind !== 'step' || pending.cellId === null) {
      return;
    }
    pending.editing = true;
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
    this._stdin.dispose();
    this._pending.clear();
    this._cells.clear();
    this._queued.clear();
    Signal.clearData(this);
  }

  private _wait(question: IApprovalQuestion, cells: AskCells): void {
    const cellId =
      question.kind === 'step' ? cells.showPending(question.step, question.code) : cells.askCellId;
    this._pending.set(question.askId, {
      ...question,
      cellId,
      editing: false,
      draft: question.plan
    });
    this._cells.set(question.askId, cells);
    this._hide(question.question);
    this._changed.emit();
  }

  /** The source of a cell of this notebook, or null. */
  private _source(cellId: string | null): string | null {
    const model = this._model();
    const cell = model === null || cellId === null ? null : findCell(model, cellId);
    return cell === null ? null : cell.sharedModel.getSource();
  }

  /** The ask moved on: its question (and an answer not sent yet) no longer waits. */
  private _forget(askId: string): void {
    for (const [prompt, queued] of this._queued) {
      if (queued.askId === askId) {
        this._queued.delete(prompt);
      }
    }
    this._cells.delete(askId);
    if (this._pending.delete(askId)) {
      this._changed.emit();
    }
  }

  private _onRequested(_: StdinAnswers, prompt: string): void {
    const queued = this._queued.get(prompt);
    if (queued !== undefined) {
      this._queued.delete(prompt);
      this._stdin.reply(prompt, queued.value);
      this._hide(prompt);
      return;
    }
    for (const pending of this._pending.values()) {
      if (pending.question === prompt) {
        this._hide(prompt);
      }
    }
  }

  /** Hide the Stdin box of this question in every view, once JupyterLab has added it. */
  private _hide(prompt: string): void {
    let frames = 0;
    const look = (): void => {
      const found = this._views().reduce((n, view) => n + hideStdinBoxes(view.node, prompt), 0);
      if (found === 0 && ++frames < HIDE_FRAMES && !this._isDisposed) {
        requestAnimationFrame(look);
      }
    };
    look();
  }

  private readonly _stdin: StdinAnswers;
  private readonly _pending = new Map<string, IPendingApproval>();
  private readonly _cells = new Map<string, AskCells>();
  /** Answers given before the kernel's request came in, by question. */
  private readonly _queued = new Map<string, { askId: string; value: string }>();
  private readonly _changed = new Signal<this, void>(this);
  private _isDisposed = false;
}

/** The approvals of each notebook document, for the panel. */
const APPROVALS = new WeakMap<object, NotebookApprovals>();

/** The approvals of a notebook document (null before it is managed). */
export function approvalsOf(document: object | null | undefined): NotebookApprovals | null {
  return document ? (APPROVALS.get(document) ?? null) : null;
}

/**
 * Show approvals in this notebook view: the document's approvals (made with its first view)
 * and this view's bars (approvalbar.ts), which go with the view.
 */
export function manageApprovals(
  tracker: INotebookTracker,
  panel: NotebookPanel
): NotebookApprovals {
  const context = panel.context;
  let approvals = APPROVALS.get(context);
  if (approvals === undefined) {
    const views = (): Notebook[] =>
      tracker
        .filter(view => view.context === context && !view.isDisposed)
        .map(view => view.content);
    const model = () => (context.isDisposed ? null : context.model);
    const made = new NotebookApprovals(panel.sessionContext, model, views);
    APPROVALS.set(context, made);
    context.disposed.connect(() => {
      APPROVALS.delete(context);
      made.dispose();
    });
    approvals = made;
  }
  const bars = new ApprovalBars(panel.content, approvals);
  panel.disposed.connect(() => bars.dispose());
  return approvals;
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
