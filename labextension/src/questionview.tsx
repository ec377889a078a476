/**
 * The panel's view of questions (the cells show them too: questioncells.ts): a step or plan
 * of the current notebook that waits for the user's approval, with the same buttons as in its
 * cell; and each ask's edit reviews, what each batch stands at and, while one waits, Accept /
 * Reject for each edit and Accept all / Reject all. Text only: nothing the kernel sends is
 * rendered as HTML.
 *
 * Every element tests look for has a `data-jupyter-ci` attribute.
 */
import type { NotebookPanel } from '@jupyterlab/notebook';
import type { ISignal } from '@lumino/signaling';
import * as React from 'react';

import type { IAskView } from './askview';
import { diffCounts, lineDiff } from './linediff';
import {
  approvalText,
  IEditReview,
  IEditView,
  IPendingApproval,
  reviewSummary
} from './question';
import { NotebookQuestions, questionsOf } from './questions';
import type { IReviewActions } from './reviewbox';

const BOX_STYLE: React.CSSProperties = {
  borderLeft: '3px solid var(--jp-warn-color1)',
  padding: '4px 8px',
  background: 'var(--jp-layout-color2)'
};

const CODE_STYLE: React.CSSProperties = {
  maxHeight: '12em',
  overflow: 'auto',
  whiteSpace: 'pre-wrap',
  fontFamily: 'var(--jp-code-font-family)'
};

/** The classes of a review's buttons. */
const ACCEPT = 'jp-ci-review-button jp-mod-accept';
const REJECT = 'jp-ci-review-button';

const BUTTONS_STYLE: React.CSSProperties = { flexWrap: 'wrap', justifyContent: 'flex-start' };

/** Re-render whenever `signal` fires (while mounted). */
function useSignal(signal: ISignal<unknown, unknown> | null): void {
  const [, setTick] = React.useState(0);
  React.useEffect(() => {
    if (signal === null) {
      return;
    }
    const bump = (): void => setTick(tick => tick + 1);
    signal.connect(bump);
    return () => {
      signal.disconnect(bump);
    };
  }, [signal]);
}

/** A button of a question: its test name, class, what it does, its label. */
function Choice(props: {
  name: string;
  className: string;
  onClick: () => void;
  children: React.ReactNode;
}): JSX.Element {
  return (
    <button className={props.className} data-jupyter-ci={props.name} onClick={props.onClick}>
      {props.children}
    </button>
  );
}

/** The buttons of one waiting question. */
function Buttons(props: { pending: IPendingApproval; questions: NotebookQuestions }): JSX.Element {
  const { pending, questions } = props;
  const answer = (action: 'run' | 'skip' | 'stop') => () => questions.answer(pending.askId, action);
  const edit = () => questions.edit(pending.askId);
  const plan = pending.kind === 'plan';
  return (
    <div className="jp-ci-buttons jp-ci-approval-buttons" style={BUTTONS_STYLE}>
      <Choice name="approval-run" className="jp-mod-styled jp-mod-accept" onClick={answer('run')}>
        {plan ? 'Approve' : 'Run'}
      </Choice>
      {plan ? null : (
        <Choice name="approval-edit" className="jp-mod-styled" onClick={edit}>
          Edit
        </Choice>
      )}
      {plan ? null : (
        <Choice name="approval-skip" className="jp-mod-styled" onClick={answer('skip')}>
          Skip
        </Choice>
      )}
      <Choice name="approval-stop" className="jp-mod-styled jp-mod-warn" onClick={answer('stop')}>
        Stop
      </Choice>
    </div>
  );
}

/** "Waiting for your approval", what waits, and its buttons. */
function Waiting(props: { pending: IPendingApproval; questions: NotebookQuestions }): JSX.Element {
  const { pending } = props;
  const shown = pending.kind === 'plan' ? pending.plan : pending.code;
  return (
    <div
      className="jp-ci-approval"
      data-jupyter-ci="approval"
      data-jupyter-ci-kind={pending.kind}
      title={pending.question}
      style={BOX_STYLE}
    >
      <div className="jp-ci-approval-title" style={{ fontWeight: 600 }}>
        Waiting for your approval
      </div>
      <div className="jp-ci-approval-text">{approvalText(pending)}</div>
      <pre className="jp-ci-approval-code" data-jupyter-ci="approval-code" style={CODE_STYLE}>
        {shown}
      </pre>
      <Buttons {...props} />
    </div>
  );
}

/** The questions of the current notebook's asks that wait for the user's approval. */
export function ApprovalPrompt(props: {
  notebook: NotebookPanel | null;
  askIds: readonly (string | null)[];
}): JSX.Element | null {
  const questions = questionsOf(props.notebook?.context);
  useSignal(questions?.changed ?? null);
  if (questions === null) {
    return null;
  }
  const waiting = props.askIds
    .map(askId => questions.pending(askId))
    .filter((pending): pending is IPendingApproval => pending !== null);
  if (waiting.length === 0) {
    return null;
  }
  return (
    <div className="jp-ci-approvals">
      {waiting.map(pending => (
        <Waiting key={pending.askId} pending={pending} questions={questions} />
      ))}
    </div>
  );
}

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
  const accept = () => actions?.accept(askId, edit.callId);
  const reject = () => actions?.reject(askId, edit.callId);
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
          <Choice name="panel-edit-accept" className={ACCEPT} onClick={accept}>
            Accept
          </Choice>
          <Choice name="panel-edit-reject" className={REJECT} onClick={reject}>
            Reject
          </Choice>
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
  const acceptAll = () => actions?.accept(askId, null);
  const rejectAll = () => actions?.reject(askId, null);
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
          <Choice name="panel-accept-all" className={ACCEPT} onClick={acceptAll}>
            Accept all
          </Choice>
          <Choice name="panel-reject-all" className={REJECT} onClick={rejectAll}>
            Reject all
          </Choice>
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
