/**
 * The bodies of a question of kind "edits" in a cell (questioncells.ts places them): in the cell
 * an edit targets, the diff of its source with Accept / Reject, or Undo once accepted; in
 * the `%%ask` cell, what the review stands at with Accept all / Reject all. Built from text
 * nodes only: sources and questions come from the kernel and are never parsed as HTML.
 *
 * Every control has a `data-jupyter-ci` attribute for browser tests.
 */
import { IEditReview, IEditView, reviewSummary } from './question';
import { diffCounts, IDiffLine, lineDiff } from './linediff';
import { button, element } from './questionbody';

/** What the buttons of a review box do. */
export interface IReviewActions {
  accept(askId: string, callId: string | null): void;
  reject(askId: string, callId: string | null): void;
  undo(askId: string, callId: string): void;
  /** Keep an accepted edit: its cell no longer offers Undo. */
  keep(callId: string): void;
}

/** An edit as a cell shows it, with the ask it belongs to and whether it can still be decided. */
export interface IShownEdit {
  askId: string;
  edit: IEditView;
  open: boolean;
  /** The cell's source is no longer the one the model read (the user changed it since). */
  stale: boolean;
}

const STALE_TEXT =
  'This cell changed since the model read it: Accept replaces what it holds now ' +
  '(Undo brings that back).';

const PREFIX: Record<IDiffLine['kind'], string> = { same: '  ', added: '+ ', removed: '- ' };

function reviewButton(label: string, part: string, onClick: () => void, accent = false): HTMLElement {
  return button(label, `jp-ci-review-button${accent ? ' jp-mod-accept' : ''}`, part, onClick);
}

/** The diff of an edit, a line per node, added and removed lines marked. */
export function diffNode(oldSource: string, newSource: string): HTMLElement {
  const pre = element('pre', 'jp-ci-diff');
  pre.dataset.jupyterCi = 'diff';
  for (const line of lineDiff(oldSource, newSource)) {
    const node = element('div', `jp-ci-diff-line jp-ci-diff-${line.kind}`);
    node.dataset.jupyterCiDiff = line.kind;
    node.textContent = PREFIX[line.kind] + line.text;
    pre.appendChild(node);
  }
  return pre;
}

/** The words of an edit's state: "proposed edit · +2 −1" / "accepted (not run)". */
function editTitle(shown: IShownEdit): string {
  const { edit } = shown;
  if (edit.undone) {
    return 'edit undone: the cell has its source from before';
  }
  if (edit.decision === 'accepted') {
    return 'edit accepted: the cell has the new source (not run yet)';
  }
  if (edit.decision === 'rejected') {
    return 'edit rejected: the cell is as it was';
  }
  const counts = diffCounts(lineDiff(edit.old, edit.new));
  return `the model proposes an edit of this cell · +${counts.added} −${counts.removed}`;
}

/** One edit's box: its title, its diff while undecided, and its buttons. */
function editNode(shown: IShownEdit, actions: IReviewActions): HTMLElement {
  const { askId, edit } = shown;
  const box = element('div', 'jp-ci-edit');
  box.dataset.jupyterCi = 'edit';
  box.dataset.jupyterCiDecision = edit.undone ? 'undone' : edit.decision ?? 'open';
  box.dataset.jupyterCiCallId = edit.callId;
  box.appendChild(element('div', 'jp-ci-edit-title', editTitle(shown)));
  if (edit.decision === null && shown.stale) {
    const warning = element('div', 'jp-ci-edit-stale', STALE_TEXT);
    warning.dataset.jupyterCi = 'edit-stale';
    box.appendChild(warning);
  }
  if (edit.decision === null) {
    box.appendChild(diffNode(edit.old, edit.new));
  }
  const bar = element('div', 'jp-ci-edit-buttons');
  if (edit.decision === null && shown.open) {
    const accept = (): void => actions.accept(askId, edit.callId);
    bar.appendChild(reviewButton('Accept', 'edit-accept', accept, true));
    bar.appendChild(reviewButton('Reject', 'edit-reject', () => actions.reject(askId, edit.callId)));
  } else if (edit.decision === 'accepted' && !edit.undone) {
    bar.appendChild(reviewButton('Undo', 'edit-undo', () => actions.undo(askId, edit.callId)));
    if (!shown.open) {
      bar.appendChild(reviewButton('Keep', 'edit-keep', () => actions.keep(edit.callId)));
    }
  }
  box.appendChild(bar);
  return box;
}

/** Fill `host` with the boxes of the edits of one cell (replacing what it showed). */
export function renderEdits(host: HTMLElement, edits: IShownEdit[], actions: IReviewActions): void {
  host.replaceChildren(...edits.map(shown => editNode(shown, actions)));
}

/** Fill `host` with a review's state and, for several open edits, Accept all / Reject all. */
export function renderReviewBar(
  host: HTMLElement,
  askId: string,
  review: IEditReview,
  actions: IReviewActions
): void {
  const bar = element('div', 'jp-ci-review-bar');
  bar.dataset.jupyterCi = 'review-bar';
  bar.appendChild(element('span', 'jp-ci-review-summary', reviewSummary(review)));
  const open = review.edits.filter(edit => edit.decision === null).length;
  if (review.state === 'open' && open > 1) {
    const accept = (): void => actions.accept(askId, null);
    bar.appendChild(reviewButton('Accept all', 'edits-accept-all', accept, true));
    bar.appendChild(reviewButton('Reject all', 'edits-reject-all', () => actions.reject(askId, null)));
  }
  host.replaceChildren(bar);
}
