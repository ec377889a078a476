/**
 * The side panel: ask in the current notebook, follow its asks, pick the model, stop.
 * Its parts: the key form (keyform.tsx), each ask (askentry.tsx), the prompt (prompt.tsx).
 *
 * Every interactive element has a `data-jupyter-ci` attribute for browser tests.
 */
import type { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { LabIcon, VDomRenderer } from '@jupyterlab/ui-components';
import type { CommandRegistry } from '@lumino/commands';
import * as React from 'react';

import { Ask } from './askentry';
import { CommandIDs } from './commands';
import type { IAskView } from './askview';
import { NotebookCost } from './costview';
import { FixButton } from './fixbutton';
import { HubSpending } from './hubspending';
import { ScrollFollower } from './follow';
import { KeyForm } from './keyform';
import type { PanelModel } from './panelmodel';
import { Prompt } from './prompt';
import { questionsOf } from './questions';
import { ApprovalPrompt } from './questionview';
import { withoutRemoteLoads } from './sanitize';

const ICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" width="16">
<g class="jp-icon3" fill="#616161">
<path d="M4 3h16a2 2 0 0 1 2 2v10a2 2 0 0 1-2 2h-7l-5 4v-4H4a2 2 0 0 1-2-2V5a2 2 0 0 1 2-2zm3.3 4.3L5.6 9l1.7 1.7 1.1-1.1L7.8 9l.6-.6-1.1-1.1zm3.2 4.2h5v-1.5h-5v1.5z"/>
</g></svg>`;

export const askIcon = new LabIcon({ name: 'jupyter-ci:ask', svgstr: ICON_SVG });

/** The model the panel's asks use: the server's default, or one it offers. */
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

/**
 * The asks, kept at the newest as they stream in (follow.ts); a new ask brings the view back
 * to the end even after the user scrolled up.
 */
function ConversationList(props: { newest: IAskView | null; children: React.ReactNode }): JSX.Element {
  const list = React.useRef<HTMLOListElement>(null);
  const follower = React.useRef<ScrollFollower | null>(null);
  const seen = React.useRef<IAskView | null>(null);
  React.useLayoutEffect(() => {
    const node = list.current;
    if (node === null) {
      return;
    }
    const following = new ScrollFollower(node);
    following.watch(node);
    follower.current = following;
    return () => following.dispose();
  }, []);
  React.useLayoutEffect(() => {
    // Asks change in place as they stream: another last ask is a new one (or a notebook's).
    if (props.newest !== seen.current) {
      follower.current?.newest();
    } else {
      follower.current?.follow();
    }
    seen.current = props.newest;
  });
  return (
    <ol className="jp-ci-conversation" data-jupyter-ci="conversation" ref={list}>
      {props.children}
    </ol>
  );
}

/** The side panel widget (re-renders whenever its model changes). */
export class AskPanel extends VDomRenderer<PanelModel> {
  /** `commands`: where the Fix command is (fixcell.ts); without it, no Fix button. */
  constructor(
    model: PanelModel,
    rendermime: IRenderMimeRegistry,
    private readonly _commands: CommandRegistry | null = null
  ) {
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

  private readonly _fix = (): void => {
    void this._commands?.execute(CommandIDs.fixCell);
  };

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
        {model.boxLine ? (
          <div className="jp-ci-box-line" data-jupyter-ci="box-line">
            {model.boxLine}
          </div>
        ) : null}
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
        <ConversationList newest={asks[asks.length - 1] ?? null}>
          {asks.map((ask, i) => (
            <Ask
              key={`${ask.cellId}-${i}`}
              ask={ask}
              rendermime={this._rendermime}
              reviews={questionsOf(notebook?.context)?.edits ?? null}
            />
          ))}
        </ConversationList>
        <NotebookCost asks={asks} />
        <HubSpending asks={asks.length} />
        <ApprovalPrompt notebook={notebook} askIds={asks.map(ask => ask.askId)} />
        <FixButton notebook={notebook} fix={this._commands ? this._fix : null} />
        <Prompt model={model} />
      </div>
    );
  }
}
