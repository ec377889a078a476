/**
 * One ask in the panel's conversation: its prompt, status, steps, answer, what was sent.
 *
 * Every element tests look for has a `data-jupyter-ci` attribute.
 */
import type { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import * as React from 'react';

import { askStatusText, phaseText, stepText } from './asktext';
import type { IAskView } from './askview';
import { AskCost } from './costview';
import { AskReviews } from './questionview';
import type { IReviewActions } from './reviewbox';

/** Render Markdown with the application's rendermime registry (sanitized). */
function Markdown(props: { source: string; rendermime: IRenderMimeRegistry }): JSX.Element {
  const host = React.useRef<HTMLDivElement>(null);
  React.useEffect(() => {
    const node = host.current;
    if (node === null) {
      return;
    }
    const renderer = props.rendermime.createRenderer('text/markdown');
    const model = props.rendermime.createModel({
      data: { 'text/markdown': props.source },
      trusted: false
    });
    node.appendChild(renderer.node);
    void renderer.renderModel(model).catch(error => {
      node.textContent = props.source;
      console.warn('jupyter-ci: could not render the answer', error);
    });
    return () => {
      renderer.dispose();
      node.textContent = '';
    };
  }, [props.source, props.rendermime]);
  return <div ref={host} className="jp-ci-answer" data-jupyter-ci="answer" />;
}

/** The current time, refreshed every second while `active`. */
function useNow(active: boolean): number {
  const [now, setNow] = React.useState(Date.now());
  React.useEffect(() => {
    if (!active) {
      return;
    }
    const timer = window.setInterval(() => setNow(Date.now()), 1000);
    return () => window.clearInterval(timer);
  }, [active]);
  return now;
}

/** "thinking · 4 s": what a running ask does now and for how long. */
function Clock(props: { ask: IAskView }): JSX.Element | null {
  const phase = props.ask.status === 'running' ? props.ask.phase : null;
  const now = useNow(phase !== null && phase !== undefined);
  if (!phase) {
    return null;
  }
  return (
    <span className="jp-ci-clock" data-jupyter-ci="clock" title={phase.question}>
      {phaseText(phase, now)}
    </span>
  );
}

/**
 * What the model was sent, part by part with token counts, as plain text: it holds
 * notebook content, never rendered as HTML.
 */
function Sent(props: { parts: IAskView['sent'] }): JSX.Element | null {
  const parts = props.parts ?? [];
  if (parts.length === 0) {
    return null;
  }
  const total = parts.reduce((sum, part) => sum + part.tokens, 0);
  return (
    <details className="jp-ci-sent" data-jupyter-ci="sent">
      <summary>
        What the model was sent · {parts.length} parts · ~{total.toLocaleString()} tokens
      </summary>
      {parts.map((part, i) => (
        <div key={i} className="jp-ci-sent-part" data-jupyter-ci="sent-part">
          <div className="jp-ci-sent-name">
            {part.name} · ~{part.tokens.toLocaleString()} tokens
          </div>
          <pre>{part.text}</pre>
        </div>
      ))}
    </details>
  );
}

/** The model, status, clock and provenance line of an ask. */
function AskMeta(props: { ask: IAskView }): JSX.Element {
  const { ask } = props;
  return (
    <div className="jp-ci-ask-meta">
      {ask.model ? <span className="jp-ci-ask-model">{ask.model}</span> : null}
      <span
        className="jp-ci-ask-status"
        data-jupyter-ci-unresolved={ask.unresolved ? 'true' : undefined}
        title={ask.unresolved?.error}
      >
        {askStatusText(ask)}
      </span>
      <Clock ask={ask} />
      {ask.fromNotebook ? (
        <span
          className="jp-ci-ask-source"
          data-jupyter-ci="from-notebook"
          title="Read from the notebook's record, which this browser cannot check: shown as plain text"
        >
          from the notebook
        </span>
      ) : null}
    </div>
  );
}

function Steps(props: { steps: IAskView['steps'] }): JSX.Element | null {
  if (props.steps.length === 0) {
    return null;
  }
  return (
    <ol className="jp-ci-steps">
      {props.steps.map(step => (
        <li
          key={step.step}
          className="jp-ci-step"
          data-jupyter-ci="step"
          data-jupyter-ci-status={step.status}
          title={step.error ?? undefined}
        >
          {stepText(step)}
        </li>
      ))}
    </ol>
  );
}

/**
 * The answer: rendered Markdown once the ask is over; as plain text while it streams, and
 * when read from the notebook (unverifiable here: its Markdown source, as text).
 */
function Answer(props: { ask: IAskView; rendermime: IRenderMimeRegistry }): JSX.Element | null {
  const { ask } = props;
  const finished = ask.status !== 'pending' && ask.status !== 'running';
  if (!ask.answer) {
    return null;
  }
  if (finished && !ask.fromNotebook) {
    return <Markdown source={ask.answer} rendermime={props.rendermime} />;
  }
  const [className, part] = finished
    ? ['jp-ci-answer-text', 'answer-text']
    : ['jp-ci-answer-stream', 'answer-stream'];
  return (
    <div className={className} data-jupyter-ci={part}>
      {ask.answer}
    </div>
  );
}

/** One ask of the conversation (`reviews`: what its edit reviews' buttons do). */
export function Ask(props: {
  ask: IAskView;
  rendermime: IRenderMimeRegistry;
  reviews?: IReviewActions | null;
}): JSX.Element {
  const { ask } = props;
  return (
    <li className="jp-ci-ask-entry" data-jupyter-ci="ask" data-jupyter-ci-status={ask.status}>
      <div className="jp-ci-prompt-text">{ask.prompt}</div>
      <AskMeta ask={ask} />
      <Steps steps={ask.steps} />
      <AskReviews ask={ask} actions={props.reviews ?? null} />
      <Answer ask={ask} rendermime={props.rendermime} />
      <AskCost ask={ask} />
      <Sent parts={ask.sent} />
      {ask.error ? (
        <div className="jp-ci-error" data-jupyter-ci="error">
          {ask.error}
        </div>
      ) : null}
    </li>
  );
}
