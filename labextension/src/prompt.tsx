/**
 * The panel's prompt row: the text to ask, files attached for it (picked or dropped), and
 * the Attach, Stop and Send buttons.
 *
 * Every interactive element has a `data-jupyter-ci` attribute for browser tests.
 */
import * as React from 'react';

import type { PanelModel } from './panelmodel';

function droppedFiles(event: React.DragEvent): File[] {
  return Array.from(event.dataTransfer?.files ?? []);
}

/** The files attached for the next ask, each with a button to leave it out. */
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

/** The handlers that take files dropped on the prompt row, and whether some hover over it. */
function useFileDrop(model: PanelModel): {
  dragging: boolean;
  handlers: Pick<React.HTMLAttributes<HTMLDivElement>, 'onDragOver' | 'onDragLeave' | 'onDrop'>;
} {
  const [dragging, setDragging] = React.useState(false);
  const handlers = {
    onDragOver: (event: React.DragEvent) => {
      if (model.canAttach && event.dataTransfer?.types.includes('Files')) {
        event.preventDefault();
        event.stopPropagation();
        setDragging(true);
      }
    },
    onDragLeave: () => setDragging(false),
    onDrop: (event: React.DragEvent) => {
      setDragging(false);
      const files = droppedFiles(event);
      if (model.canAttach && files.length > 0) {
        // Not JupyterLab's own drop handling (which would open the file).
        event.preventDefault();
        event.stopPropagation();
        void model.attach(files);
      }
    }
  };
  return { dragging, handlers };
}

/** The Attach button and its hidden file picker. */
function AttachButton(props: { model: PanelModel }): JSX.Element {
  const { model } = props;
  const picker = React.useRef<HTMLInputElement>(null);
  return (
    <>
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
    </>
  );
}

/** Attach, Stop and Send. */
function PromptButtons(props: { model: PanelModel; canSend: boolean; send: () => void }): JSX.Element {
  const { model } = props;
  return (
    <div className="jp-ci-buttons">
      <AttachButton model={model} />
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
        disabled={!props.canSend}
        title="Put an %%ask cell below the active cell and run it"
        onClick={props.send}
      >
        Send
      </button>
    </div>
  );
}

/** The prompt's text: Enter sends, Shift+Enter breaks the line. */
function PromptText(props: {
  text: string;
  enabled: boolean;
  setText: (text: string) => void;
  send: () => void;
}): JSX.Element {
  return (
    <textarea
      className="jp-ci-prompt"
      data-jupyter-ci="prompt"
      rows={3}
      placeholder="Ask… (Enter sends, Shift+Enter: new line)"
      value={props.text}
      disabled={!props.enabled}
      onChange={event => props.setText(event.target.value)}
      onKeyDown={event => {
        if (event.key === 'Enter' && !event.shiftKey && !event.nativeEvent.isComposing) {
          event.preventDefault();
          props.send();
        }
      }}
    />
  );
}

/** The prompt row: attachments, the text and the buttons; files may be dropped on it. */
export function Prompt(props: { model: PanelModel }): JSX.Element {
  const [text, setText] = React.useState('');
  const { model } = props;
  const { dragging, handlers } = useFileDrop(model);
  const enabled = model.notebook !== null && model.hasKernel;
  const send = (): void => {
    if (enabled && model.send(text)) {
      setText('');
    }
  };
  const canSend = enabled && !!text.trim() && model.uploading === 0;
  return (
    <div
      className={`jp-ci-prompt-row${dragging ? ' jp-mod-dropTarget' : ''}`}
      data-jupyter-ci="drop"
      {...handlers}
    >
      <Attachments model={model} />
      <PromptText text={text} enabled={enabled} setText={setText} send={send} />
      <PromptButtons model={model} canSend={canSend} send={send} />
    </div>
  );
}
