/**
 * The side panel: ask in the current notebook, follow its asks, pick the model, stop.
 *
 * Every interactive element has a `data-jupyter-ci` attribute for browser tests.
 */
import type { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { LabIcon, VDomRenderer } from '@jupyterlab/ui-components';
import * as React from 'react';

import type { IAskView, IStepView } from './conversation';
import { KeyForm } from './keyform';
import type { PanelModel } from './panelmodel';
import { withoutRemoteLoads } from './sanitize';

const ICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" width="16">
<g class="jp-icon3" fill="#616161">
<path d="M4 3h16a2 2 0 0 1 2 2v10a2 2 0 0 1-2 2h-7l-5 4v-4H4a2 2 0 0 1-2-2V5a2 2 0 0 1 2-2zm3.3 4.3L5.6 9l1.7 1.7 1.1-1.1L7.8 9l.6-.6-1.1-1.1zm3.2 4.2h5v-1.5h-5v1.5z"/>
</g></svg>`;

export const askIcon = new LabIcon({ name: 'jupyter-ci:ask', svgstr: ICON_SVG });

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

function stepText(step: IStepView): string {
  const parts = [`step ${step.step}`];
  if (step.status === 'running') {
    parts.push(step.attempt > 1 ? `running (attempt ${step.attempt})` : 'running');
  } else if (step.status === 'ok') {
    parts.push(step.failedAttempts > 0 ? 'failed → fixed' : 'done');
  } else {
    parts.push(step.status === 'error' ? 'failed' : step.status);
  }
  if (step.durationS !== null) {
    parts.push(`${step.durationS.toFixed(1)} s`);
  }
  return parts.join(' · ');
}

const STATUS_TEXT: Record<IAskView['status'], string> = {
  pending: 'waiting for the kernel…',
  running: 'running…',
  done: 'done',
  failed: 'failed',
  interrupted: 'interrupted'
};

function askStatusText(ask: IAskView): string {
  if (ask.reused) {
    return 'reused';
  }
  if (ask.status === 'done' && ask.unresolved) {
    return `done with an unresolved error in step ${ask.unresolved.step}`;
  }
  return STATUS_TEXT[ask.status];
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

const PHASE_TEXT = { thinking: 'thinking', running: 'running a step', writing: 'writing' };

/** "thinking · 4 s": what a running ask does now and for how long. */
function Clock(props: { ask: IAskView }): JSX.Element | null {
  const phase = props.ask.status === 'running' ? props.ask.phase : null;
  const now = useNow(phase !== null && phase !== undefined);
  if (!phase) {
    return null;
  }
  const seconds = Math.max(0, Math.floor((now - phase.since) / 1000));
  return (
    <span className="jp-ci-clock" data-jupyter-ci="clock">
      {PHASE_TEXT[phase.what]} · {seconds} s
    </span>
  );
}

/**
 * What the model was sent, part by part with token counts (`%%ask --show-context`), as
 * plain text: it holds notebook content, never rendered as HTML.
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

function Ask(props: { ask: IAskView; rendermime: IRenderMimeRegistry }): JSX.Element {
  const { ask } = props;
  const finished = ask.status !== 'pending' && ask.status !== 'running';
  return (
    <li className="jp-ci-ask-entry" data-jupyter-ci="ask" data-jupyter-ci-status={ask.status}>
      <div className="jp-ci-prompt-text">{ask.prompt}</div>
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
      {ask.steps.length > 0 ? (
        <ol className="jp-ci-steps">
          {ask.steps.map(step => (
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
      ) : null}
      {ask.answer && finished && !ask.fromNotebook ? (
        <Markdown source={ask.answer} rendermime={props.rendermime} />
      ) : null}
      {ask.answer && finished && ask.fromNotebook ? (
        // Read from the notebook, unverifiable here: its Markdown source, as text.
        <div className="jp-ci-answer-text" data-jupyter-ci="answer-text">
          {ask.answer}
        </div>
      ) : null}
      {ask.answer && !finished ? (
        <div className="jp-ci-answer-stream" data-jupyter-ci="answer-stream">
          {ask.answer}
        </div>
      ) : null}
      <Sent parts={ask.sent} />
      {ask.error ? (
        <div className="jp-ci-error" data-jupyter-ci="error">
          {ask.error}
        </div>
      ) : null}
    </li>
  );
}

function droppedFiles(event: React.DragEvent): File[] {
  return Array.from(event.dataTransfer?.files ?? []);
}

function Attachments(props: { model: PanelModel }): JSX.Element | null {
  const { model } = props;
  if (model.attached.length === 0 && model.uploading === 0) {
    return null;
  }
  return (
    <ul className="jp-ci-attached" data-jupyter-ci="attached">
      {model.attached.map(file => (
        <li key={file.path} className="jp-ci-attached-file" data-jupyter-ci="attached-file" title={file.path}>
          <span>{file.relative}</span>
          <button
            className="jp-ci-detach"
            data-jupyter-ci="detach"
            title="Leave this file out of the next ask (it stays in the folder)"
            onClick={() => model.detach(file.path)}
          >
            ×
          </button>
        </li>
      ))}
      {model.uploading > 0 ? (
        <li className="jp-ci-attached-file" data-jupyter-ci="uploading">
          uploading {model.uploading}…
        </li>
      ) : null}
    </ul>
  );
}

function Prompt(props: { model: PanelModel }): JSX.Element {
  const [text, setText] = React.useState('');
  const [dragging, setDragging] = React.useState(false);
  const picker = React.useRef<HTMLInputElement>(null);
  const { model } = props;
  const enabled = model.notebook !== null && model.hasKernel;
  const send = (): void => {
    if (enabled && model.send(text)) {
      setText('');
    }
  };
  return (
    <div
      className={`jp-ci-prompt-row${dragging ? ' jp-mod-dropTarget' : ''}`}
      data-jupyter-ci="drop"
      onDragOver={event => {
        if (model.canAttach && event.dataTransfer?.types.includes('Files')) {
          event.preventDefault();
          event.stopPropagation();
          setDragging(true);
        }
      }}
      onDragLeave={() => setDragging(false)}
      onDrop={event => {
        setDragging(false);
        const files = droppedFiles(event);
        if (model.canAttach && files.length > 0) {
          // Not JupyterLab's own drop handling (which would open the file).
          event.preventDefault();
          event.stopPropagation();
          void model.attach(files);
        }
      }}
    >
      <Attachments model={model} />
      <textarea
        className="jp-ci-prompt"
        data-jupyter-ci="prompt"
        rows={3}
        placeholder="Ask… (Enter sends, Shift+Enter: new line)"
        value={text}
        disabled={!enabled}
        onChange={event => setText(event.target.value)}
        onKeyDown={event => {
          if (event.key === 'Enter' && !event.shiftKey && !event.nativeEvent.isComposing) {
            event.preventDefault();
            send();
          }
        }}
      />
      <div className="jp-ci-buttons">
        <input
          ref={picker}
          type="file"
          multiple
          hidden
          data-jupyter-ci="attach-input"
          onChange={event => {
            const files = Array.from(event.target.files ?? []);
            event.target.value = '';
            void model.attach(files);
          }}
        />
        <button
          className="jp-mod-styled jp-ci-attach"
          data-jupyter-ci="attach"
          disabled={!model.canAttach}
          title="Upload files into the data/ folder beside the notebook, for the next ask (or drop them here)"
          onClick={() => picker.current?.click()}
        >
          Attach
        </button>
        <button
          className="jp-mod-styled jp-mod-warn jp-ci-stop"
          data-jupyter-ci="stop"
          disabled={!model.canStop}
          title="Interrupt the kernel of this notebook"
          onClick={() => void model.stop()}
        >
          Stop
        </button>
        <button
          className="jp-mod-styled jp-mod-accept jp-ci-send"
          data-jupyter-ci="send"
          disabled={!enabled || !text.trim() || model.uploading > 0}
          title="Put an %%ask cell below the active cell and run it"
          onClick={send}
        >
          Send
        </button>
      </div>
    </div>
  );
}

function ModelPicker(props: { model: PanelModel }): JSX.Element {
  const { model } = props;
  const config = model.config;
  const offered = config?.models ?? [];
  const picked = model.pickedModel;
  const options = picked && !offered.includes(picked) ? [picked, ...offered] : offered;
  const fallback = config?.default_model ? `server default (${config.default_model})` : 'server default';
  return (
    <label className="jp-ci-model-row">
      <span>Model</span>
      <select
        className="jp-ci-model"
        data-jupyter-ci="model"
        title={picked || fallback}
        value={picked}
        onChange={event => void model.pickModel(event.target.value)}
      >
        <option value="">{fallback}</option>
        {options.map(name => (
          <option key={name} value={name} title={name}>
            {name}
          </option>
        ))}
      </select>
    </label>
  );
}

/** The side panel widget (re-renders whenever its model changes). */
export class AskPanel extends VDomRenderer<PanelModel> {
  constructor(model: PanelModel, rendermime: IRenderMimeRegistry) {
    super(model);
    // Answers are model-written: nothing loads from elsewhere (beacons), on top of
    // JupyterLab's rules.
    this._rendermime = rendermime.clone({
      sanitizer: withoutRemoteLoads(rendermime.sanitizer)
    });
    this.addClass('jp-ci-panel');
    this.node.dataset.jupyterCi = 'panel';
  }

  private readonly _rendermime: IRenderMimeRegistry;

  protected override onAfterShow(): void {
    void this.model.refreshConfig();
  }

  protected render(): JSX.Element {
    const model = this.model;
    const asks = model.conversation?.asks ?? [];
    const notebook = model.notebook;
    return (
      <div className="jp-ci-panel-body">
        <header className="jp-ci-header">
          <span className="jp-ci-title">Ask</span>
          <span className="jp-ci-notebook" data-jupyter-ci="notebook">
            {notebook ? notebook.title.label : 'no notebook'}
          </span>
        </header>
        {model.messages.map(message => (
          <div
            key={message.kind}
            className="jp-ci-message"
            data-jupyter-ci="message"
            data-jupyter-ci-kind={message.kind}
          >
            {message.text}
          </div>
        ))}
        <KeyForm model={model} />
        <ModelPicker model={model} />
        <ol className="jp-ci-conversation" data-jupyter-ci="conversation">
          {asks.map((ask, i) => (
            <Ask key={`${ask.cellId}-${i}`} ask={ask} rendermime={this._rendermime} />
          ))}
        </ol>
        <Prompt model={model} />
      </div>
    );
  }
}
