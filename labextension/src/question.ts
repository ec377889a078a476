/**
 * A question an ask waits on the user for, whatever its kind: a step to approve, a plan to
 * approve, edits of the user's cells to review. What is asked (the kernel's stdin prompt and
 * the body: a step's code, a plan, the edits), the answers (the JSON forms
 * `jupyter_ci.agent.approval.parse_answer` reads), and how an answer goes back: as the reply
 * to the kernel's stdin question, whose Stdin box is hidden. Install questions keep the box.
 *
 * The edits' state is kept in the conversation (its IEditReview), so the panel shows it too.
 */
import type { ISessionContext } from '@jupyterlab/apputils';
import type { IDisposable } from '@lumino/disposable';

import type { IProposedEdit, IWaitingForUser } from './protocol';
import { hideStdinBoxes, QUESTION_PREFIX, StdinAnswers } from './stdinreply';

/** What a question is about: its body and its answers differ, the rest is shared. */
export type QuestionKind = 'step' | 'plan' | 'edits';

/** A step or a plan the kernel waits on the user's approval for. */
export interface IApprovalQuestion {
  askId: string;
  kind: 'step' | 'plan';
  /** The stdin prompt the answer replies to. */
  question: string;
  /** For a step: its number and attempt (a fix is a later attempt), and its code. */
  step: number;
  attempt: number;
  code: string;
  /** For a plan: the numbered plan the model proposes. */
  plan: string;
}

/** A step or plan waiting for the user's decision, and where it is shown. */
export interface IPendingApproval extends IApprovalQuestion {
  /** The cell that shows it: the step's cell, or the `%%ask` cell for a plan. */
  cellId: string | null;
  /** The user asked to edit the step's code (its cell is editable and focused). */
  editing: boolean;
  /** The plan as the user edits it. */
  draft: string;
}

/** What the user decides: run it (as proposed or edited), skip it, stop the ask. */
export type ApprovalAction = 'run' | 'skip' | 'stop';

/** The approval question a waiting_for_user message asks, or null (an install, edits). */
export function approvalOf(msg: IWaitingForUser): IApprovalQuestion | null {
  if ((msg.kind !== 'step' && msg.kind !== 'plan') || !msg.question.startsWith(QUESTION_PREFIX)) {
    return null;
  }
  return {
    askId: msg.ask_id,
    kind: msg.kind,
    question: msg.question,
    step: typeof msg.step === 'number' ? msg.step : 0,
    attempt: typeof msg.attempt === 'number' ? msg.attempt : 1,
    code: typeof msg.code === 'string' ? msg.code : '',
    plan: typeof msg.plan === 'string' ? msg.plan : ''
  };
}

/**
 * The answer to a step: run (the code as it stands now in its cell: `edit` with that code
 * when the user changed it), skip or stop.
 */
export function stepAnswer(action: ApprovalAction, proposed: string, current: string): string {
  if (action === 'run' && current !== proposed) {
    return JSON.stringify({ decision: 'edit', code: current });
  }
  return JSON.stringify({ decision: action });
}

/** The answer to a plan: approve it (`edit` with the text when the user changed it) or stop. */
export function planAnswer(action: 'run' | 'stop', proposed: string, current: string): string {
  if (action === 'run' && current !== proposed) {
    return JSON.stringify({ decision: 'edit', plan: current });
  }
  return JSON.stringify({ decision: action });
}

/** What the cell and the panel say about a waiting approval. */
export function approvalText(question: IApprovalQuestion): string {
  if (question.kind === 'plan') {
    return 'The model proposes this plan: edit it if you like, then approve it or stop the ask.';
  }
  const fix = question.attempt > 1 ? ` (a fix, attempt ${question.attempt})` : '';
  const what = 'run it, edit it, skip it or stop the ask';
  return `Step ${question.step}${fix} waits for your approval: ${what}.`;
}

export type EditDecision = 'accepted' | 'rejected';

/** One proposed edit and what became of it here. */
export interface IEditView {
  callId: string;
  cellId: string;
  old: string;
  new: string;
  /** null while undecided. */
  decision: EditDecision | null;
  /** The source the cell had when the edit was accepted: what Undo puts back. */
  before?: string;
  /** Accepted, then undone: the cell has its source from before again. */
  undone?: boolean;
}

/** The edits of one model turn, reviewed together. */
export interface IEditReview {
  /** The kernel's stdin question (its prompt), which the answer replies to. */
  question: string;
  edits: IEditView[];
  /** 'open' until every edit is decided; then sent to the kernel (or answered in its box). */
  state: 'open' | 'answered' | 'closed';
}

/** The review a waiting_for_user of kind "edits" asks for, or null for another question. */
export function reviewOf(msg: IWaitingForUser): IEditReview | null {
  if (msg.kind !== 'edits' || !Array.isArray(msg.edits) || msg.edits.length === 0) {
    return null;
  }
  return {
    question: msg.question,
    edits: msg.edits.map((edit: IProposedEdit) => ({
      callId: edit.call_id,
      cellId: edit.cell_id,
      old: edit.old,
      new: edit.new,
      decision: null
    })),
    state: 'open'
  };
}

/** The review still waiting for decisions among an ask's reviews, if any. */
export function openReview(reviews: readonly IEditReview[] | undefined): IEditReview | null {
  return reviews?.find(review => review.state === 'open') ?? null;
}

/**
 * Decide one undecided edit (`callId`), or every undecided one (null); return the edits
 * decided now. A decided edit stays as it was decided.
 */
export function decide(
  review: IEditReview,
  callId: string | null,
  decision: EditDecision
): IEditView[] {
  if (review.state !== 'open') {
    return [];
  }
  const now = review.edits.filter(
    edit => edit.decision === null && (callId === null || edit.callId === callId)
  );
  for (const edit of now) {
    edit.decision = decision;
  }
  return now;
}

/** Whether every edit of the review is decided (its answer can go). */
export function isDecided(review: IEditReview): boolean {
  return review.edits.every(edit => edit.decision !== null);
}

/**
 * The kernel's answer: `{"decisions": {call_id: "accepted"|"rejected"}}`. An edit accepted
 * and undone before the answer went counts as rejected (the cell is as it was).
 */
export function answerText(review: IEditReview): string {
  const decisions: Record<string, EditDecision> = {};
  for (const edit of review.edits) {
    const said = edit.decision === 'accepted' && !edit.undone ? 'accepted' : 'rejected';
    decisions[edit.callId] = said;
  }
  return JSON.stringify({ decisions });
}

/** Every edit of these reviews that targets the cell `cellId`. */
export function editsOf(reviews: readonly IEditReview[], cellId: string): IEditView[] {
  return reviews.flatMap(review => review.edits.filter(edit => edit.cellId === cellId));
}

/** "2 edits: 1 accepted, 1 rejected" / "1 edit to review". */
export function reviewSummary(review: IEditReview): string {
  const n = review.edits.length;
  const noun = n === 1 ? 'edit' : 'edits';
  const accepted = review.edits.filter(e => e.decision === 'accepted' && !e.undone).length;
  const undone = review.edits.filter(e => e.undone).length;
  const rejected = review.edits.filter(e => e.decision === 'rejected').length;
  const open = n - accepted - undone - rejected;
  const parts = [
    accepted ? `${accepted} accepted` : '',
    undone ? `${undone} undone` : '',
    rejected ? `${rejected} rejected` : '',
    open ? `${open} ${review.state === 'closed' ? 'not reviewed (the ask ended)' : 'to review'}` : ''
  ].filter(Boolean);
  return `${n} proposed ${noun} of your cells: ${parts.join(', ')}`;
}

/** How long to look for the Stdin box JupyterLab adds for a question, in frames. */
const HIDE_FRAMES = 120;

/**
 * The answers of one notebook document's questions, over the kernel's stdin. An answer
 * given before the kernel's request came in (it comes on another channel) goes when it
 * does; the Stdin box of a question this page answers is hidden in every view.
 */
export class QuestionReplies implements IDisposable {
  /**
   * `views` are the nodes of the document's views; `asked` says whether a prompt is a
   * question this page shows now (its box is hidden when it comes).
   */
  constructor(
    session: ISessionContext,
    private readonly _views: () => HTMLElement[],
    private readonly _asked: (prompt: string) => boolean
  ) {
    this._stdin = new StdinAnswers(session);
    this._stdin.requested.connect((_, prompt) => this._onRequested(prompt));
  }

  /** Whether the kernel waits for an answer to this question now. */
  waits(prompt: string): boolean {
    return this._stdin.waits(prompt);
  }

  /** Answer the question `prompt` of ask `askId` with `value`, now or once it is asked. */
  send(askId: string, prompt: string, value: string): void {
    if (!this._stdin.reply(prompt, value)) {
      this._queued.set(prompt, { askId, value });
    }
    this.hide(prompt);
  }

  /** A question asked anew: an answer left from an earlier one with its prompt is stale. */
  discard(prompt: string): void {
    this._queued.delete(prompt);
  }

  /** The ask moved on: an answer of its not sent yet no longer goes. */
  forget(askId: string): void {
    for (const [prompt, queued] of this._queued) {
      if (queued.askId === askId) {
        this._queued.delete(prompt);
      }
    }
  }

  /** Hide the Stdin box of this question in every view, once JupyterLab has added it. */
  hide(prompt: string): void {
    let frames = 0;
    const look = (): void => {
      const found = this._views().reduce((n, view) => n + hideStdinBoxes(view, prompt), 0);
      if (found === 0 && ++frames < HIDE_FRAMES && !this.isDisposed) {
        requestAnimationFrame(look);
      }
    };
    look();
  }

  get isDisposed(): boolean {
    return this._stdin.isDisposed;
  }

  dispose(): void {
    this._queued.clear();
    this._stdin.dispose();
  }

  private _onRequested(prompt: string): void {
    const queued = this._queued.get(prompt);
    if (queued !== undefined) {
      this._queued.delete(prompt);
      this._stdin.reply(prompt, queued.value);
      this.hide(prompt);
    } else if (this._asked(prompt)) {
      this.hide(prompt);
    }
  }

  private readonly _stdin: StdinAnswers;
  /** Answers given before the kernel's request came in, by question. */
  private readonly _queued = new Map<string, { askId: string; value: string }>();
}
