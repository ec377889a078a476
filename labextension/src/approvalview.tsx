/**
 * The panel's part of approval and Fix: a step or plan of the current notebook that waits
 * for the user's approval, with the same buttons as in its cell (approvalbar.ts); and a Fix
 * button when the active cell shows an error (fixcell.ts). Text only: nothing the kernel
 * sends is rendered as HTML.
 *
 * Every button has a `data-jupyter-ci` attribute for browser tests.
 */
import type { NotebookPanel } from '@jupyterlab/notebook';
import type { ISignal } from '@lumino/signaling';
import * as React from 'react';

import { approvalText } from './approval';
import { approvalsOf, IPendingApproval, NotebookApprovals } from './approvalcontrol';
import { erroredCell } from './fixcell';

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

/** The buttons of one waiting question. */
function Buttons(props: { pending: IPendingApproval; approvals: NotebookApprovals }): JSX.Element {
  const { pending, approvals } = props;
  const answer = (action: 'run' | 'skip' | 'stop') => () => approvals.answer(pending.askId, action);
  const plan = pending.kind === 'plan';
  return (
    <div className="jp-ci-buttons jp-ci-approval-buttons" style={BUTTONS_STYLE}>
      <button
        className="jp-mod-styled jp-mod-accept"
        data-jupyter-ci="approval-run"
        onClick={answer('run')}
      >
        {plan ? 'Approve' : 'Run'}
      </button>
      {plan ? null : (
        <button
          className="jp-mod-styled"
          data-jupyter-ci="approval-edit"
          onClick={() => approvals.edit(pending.askId)}
        >
          Edit
        </button>
      )}
      {plan ? null : (
        <button className="jp-mod-styled" data-jupyter-ci="approval-skip" onClick={answer('skip')}>
          Skip
        </button>
      )}
      <button
        className="jp-mod-styled jp-mod-warn"
        data-jupyter-ci="approval-stop"
        onClick={answer('stop')}
      >
        Stop
      </button>
    </div>
  );
}

/** "Waiting for your approval", what waits, and its buttons. */
function Waiting(props: { pending: IPendingApproval; approvals: NotebookApprovals }): JSX.Element {
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
  const approvals = approvalsOf(props.notebook?.context);
  useSignal(approvals?.changed ?? null);
  if (approvals === null) {
    return null;
  }
  const waiting = props.askIds
    .map(askId => approvals.pending(askId))
    .filter((pending): pending is IPendingApproval => pending !== null);
  if (waiting.length === 0) {
    return null;
  }
  return (
    <div className="jp-ci-approvals">
      {waiting.map(pending => (
        <Waiting key={pending.askId} pending={pending} approvals={approvals} />
      ))}
    </div>
  );
}

/** A Fix button while the active cell of the current notebook shows an error. */
export function FixButton(props: {
  notebook: NotebookPanel | null;
  fix: (() => void) | null;
}): JSX.Element | null {
  const { notebook, fix } = props;
  const [, setTick] = React.useState(0);
  React.useEffect(() => {
    const content = notebook?.content;
    if (!content) {
      return;
    }
    const bump = (): void => setTick(tick => tick + 1);
    let outputs: ISignal<unknown, unknown> | null = null;
    const watch = (): void => {
      outputs?.disconnect(bump);
      const model = content.activeCell?.model;
      // A disposed model (a cell deleted or moved) has no outputs any more.
      const held = model?.type === 'code' ? (model as unknown as IHasOutputs).outputs : null;
      outputs = held?.changed ?? null;
      outputs?.connect(bump);
      bump();
    };
    content.activeCellChanged.connect(watch);
    watch();
    return () => {
      content.activeCellChanged.disconnect(watch);
      outputs?.disconnect(bump);
    };
  }, [notebook]);
  const cell = erroredCell(notebook);
  if (cell === null || fix === null) {
    return null;
  }
  return (
    <button
      className="jp-mod-styled jp-ci-fix"
      data-jupyter-ci="fix"
      title="Ask jupyter-ci to fix the error of the active cell, in a new %%ask cell below it"
      onClick={fix}
    >
      Fix this cell's error
    </button>
  );
}

/** A code cell model as the Fix button reads it: its outputs' change signal. */
interface IHasOutputs {
  outputs: { changed: ISignal<unknown, unknown> } | null;
}
