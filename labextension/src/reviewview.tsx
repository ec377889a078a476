/**
 * The edits of the user's cells an ask proposed, in the panel: what each batch stands at,
 * and, while one waits, Accept / Reject for each edit and Accept all / Reject all (the cells
 * show the diffs: reviewbox.ts).
 *
 * Every element tests look for has a `data-jupyter-ci` attribute.
 */
import * as React from 'react';

import type { IAskView } from './askview';
import { IEditReview, IEditView, reviewSummary } from './editstate';
import { diffCounts, lineDiff } from './linediff';
import type { IReviewActions } from './reviewbox';

function decisionText(edit: IEditView): string {
  if (edit.undone) {
    return 'undone';
  }
  return edit.decision ?? 'to review';
}

/** One edit: the lines it changes, what was decided, and its buttons while it waits. */
function EditRow(props: {
  askId: string;
  edit: IEditView;
  open: boolean;
  actions: IReviewActions | null;
}): JSX.Element {
  const { askId, edit, open, actions } = props;
  const counts = diffCounts(lineDiff(edit.old, edit.new));
  const waiting = open && edit.decision === null && actions !== null;
  return (
    <li
      className="jp-ci-review-edit"
      data-jupyter-ci="panel-edit"
      data-jupyter-ci-decision={edit.undone ? 'undone' : edit.decision ?? 'open'}
    >
      <span>
        edit of a cell · +{counts.added} −{counts.removed} · {decisionText(edit)}
      </span>
      {waiting ? (
        <>
          <button
            className="jp-ci-review-button jp-mod-accept"
            data-jupyter-ci="panel-edit-accept"
            onClick={() => actions.accept(askId, edit.callId)}
          >
            Accept
          </button>
          <button
            className="jp-ci-review-button"
            data-jupyter-ci="panel-edit-reject"
            onClick={() => actions.reject(askId, edit.callId)}
          >
            Reject
          </button>
        </>
      ) : null}
    </li>
  );
}

/** One batch of edits. */
function Review(props: {
  askId: string;
  review: IEditReview;
  running: boolean;
  actions: IReviewActions | null;
}): JSX.Element {
  const { askId, review, actions } = props;
  const open = props.running && review.state === 'open';
  const several = review.edits.filter(edit => edit.decision === null).length > 1;
  return (
    <div className="jp-ci-review-panel" data-jupyter-ci="panel-review">
      <div className="jp-ci-review-summary">{reviewSummary(review)}</div>
      <ul className="jp-ci-review-edits">
        {review.edits.map(edit => (
          <EditRow key={edit.callId} askId={askId} edit={edit} open={open} actions={actions} />
        ))}
      </ul>
      {open && several && actions !== null ? (
        <div className="jp-ci-review-all">
          <button
            className="jp-ci-review-button jp-mod-accept"
            data-jupyter-ci="panel-accept-all"
            onClick={() => actions.accept(askId, null)}
          >
            Accept all
          </button>
          <button
            className="jp-ci-review-button"
            data-jupyter-ci="panel-reject-all"
            onClick={() => actions.reject(askId, null)}
          >
            Reject all
          </button>
        </div>
      ) : null}
    </div>
  );
}

/** The edit reviews of an ask, if it proposed any. */
export function AskReviews(props: {
  ask: IAskView;
  actions: IReviewActions | null;
}): JSX.Element | null {
  const { ask, actions } = props;
  const askId = ask.askId;
  if (askId === null || !ask.reviews || ask.reviews.length === 0) {
    return null;
  }
  return (
    <>
      {ask.reviews.map((review, i) => (
        <Review
          key={i}
          askId={askId}
          review={review}
          running={ask.status === 'running'}
          actions={actions}
        />
      ))}
    </>
  );
}
