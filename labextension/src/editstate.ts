/**
 * The review of edits the model proposes for the user's own cells (`edit_cell`), as the
 * panel and the cells show it: each edit undecided, accepted (maybe undone since) or
 * rejected, and the answer the kernel gets once every edit of a batch is decided. Pure
 * state; editreview.ts does what it says to the notebook and the kernel.
 */
import type { IProposedEdit, IWaitingForUser } from './protocol';

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
