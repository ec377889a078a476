/**
 * The panel's "Model keys" form: what the server holds, and a key (with a base URL) to give
 * it where it was started without one. URLs are api.ts's; the model sends the key.
 */
import * as React from 'react';

import type { IKeyProvider } from './api';
import type { PanelModel } from './panelmodel';

/** Which providers the server holds a key (or a keyless server's URL) for; remove one. */
function KeyList(props: { providers: readonly IKeyProvider[]; remove: (name: string) => void }): JSX.Element {
  return (
    <ul className="jp-ci-key-list">
      {props.providers.map(p => (
        <li key={p.name} data-jupyter-ci="key-provider" data-jupyter-ci-configured={String(p.configured)}>
          {p.label}: {p.configured ? 'configured' : 'no key'}
          {p.configured ? (
            <button
              type="button"
              className="jp-ci-key-remove"
              data-jupyter-ci="key-remove"
              title={`Have the server forget the ${p.label} key and base URL (and its key file)`}
              onClick={() => props.remove(p.name)}
            >
              Remove
            </button>
          ) : null}
        </li>
      ))}
    </ul>
  );
}

/** What the last save said: where it was saved, what the key check found, or why not. */
function KeyStatus(props: { text: string; failed: boolean }): JSX.Element | null {
  if (!props.text) {
    return null;
  }
  return (
    <div
      className={props.failed ? 'jp-ci-error' : 'jp-ci-key-status'}
      data-jupyter-ci="key-status"
      data-jupyter-ci-failed={String(props.failed)}
    >
      {props.text}
    </div>
  );
}

/** What the form holds while the user fills it in (never the key once sent). */
interface IKeyFields {
  provider: string;
  key: string;
  baseUrl: string;
  remember: boolean;
}

/** The form's fields, whether a save is under way, and the save itself (`saved` after one). */
function useKeyForm(
  model: PanelModel,
  saved: () => void
): {
  fields: IKeyFields;
  set: (change: Partial<IKeyFields>) => void;
  busy: boolean;
  save: (provider: IKeyProvider) => Promise<void>;
} {
  const [fields, setFields] = React.useState<IKeyFields>({
    provider: '',
    key: '',
    baseUrl: '',
    remember: false
  });
  const [busy, setBusy] = React.useState(false);
  const set = (change: Partial<IKeyFields>): void => setFields(old => ({ ...old, ...change }));
  const save = async (provider: IKeyProvider): Promise<void> => {
    setBusy(true);
    const { key, baseUrl, remember } = fields;
    const sent = { provider: provider.name, key, base_url: baseUrl, remember };
    set({ key: '' }); // never kept in the page once sent
    const ok = await model.saveKey(sent);
    setBusy(false);
    if (ok) {
      set({ baseUrl: '', remember: false });
      saved();
    }
  };
  return { fields, set, busy, save };
}

/** Tell whether the form can be sent: a key, or a base URL alone for a keyless server. */
function canSave(fields: IKeyFields, chosen: IKeyProvider): boolean {
  return fields.key.trim() !== '' || (chosen.keyless_with_url && fields.baseUrl.trim() !== '');
}

/** The provider picker, the key and base URL fields, and whether to remember them. */
function KeyInputs(props: {
  providers: readonly IKeyProvider[];
  chosen: IKeyProvider;
  fields: IKeyFields;
  set: (change: Partial<IKeyFields>) => void;
}): JSX.Element {
  const { providers, chosen, fields, set } = props;
  return (
    <>
      <select
        data-jupyter-ci="key-provider-select"
        value={chosen.name}
        onChange={event => set({ provider: event.target.value })}
      >
        {providers.map(p => (
          <option key={p.name} value={p.name}>
            {p.label}
          </option>
        ))}
      </select>
      <input
        type="password"
        data-jupyter-ci="key-input"
        placeholder={`${chosen.label} API key`}
        autoComplete="off"
        spellCheck={false}
        value={fields.key}
        onChange={event => set({ key: event.target.value })}
      />
      <input
        type="url"
        data-jupyter-ci="key-url"
        placeholder={
          chosen.keyless_with_url
            ? 'Base URL (optional: Ollama, vLLM, any OpenAI-compatible server)'
            : 'Base URL (optional)'
        }
        spellCheck={false}
        value={fields.baseUrl}
        onChange={event => set({ baseUrl: event.target.value })}
      />
      <label title="Save it in a private file (mode 600) on the server, read when it starts again">
        <input
          type="checkbox"
          data-jupyter-ci="key-remember"
          checked={fields.remember}
          onChange={event => set({ remember: event.target.checked })}
        />
        Remember on this server
      </label>
    </>
  );
}

/** The folded form's one line: which providers are configured, and how to change them. */
function KeySummary(props: { providers: readonly IKeyProvider[]; open: boolean }): JSX.Element {
  const configured = props.providers.filter(p => p.configured).map(p => p.label);
  const held = configured.length > 0 ? `${configured.join(', ')} configured` : 'no key yet';
  return (
    <>
      <span className="jp-ci-keys-title">Model keys</span>
      {props.open ? null : (
        <span className="jp-ci-keys-held" data-jupyter-ci="keys-held">
          {held} · change
        </span>
      )}
    </>
  );
}

/**
 * Whether the form is open: as the user left it, else open while no model is usable, no
 * provider is configured, or the last save said something went wrong (its check failed).
 */
function useFolding(model: PanelModel): { open: boolean; toggle: () => void; reset: () => void } {
  const [chosen, setChosen] = React.useState<boolean | null>(null);
  const providers = model.config?.providers ?? [];
  const wanted = model.needsKey || !providers.some(p => p.configured) || model.keyStatus.failed;
  const open = chosen ?? wanted;
  return { open, toggle: () => setChosen(!open), reset: () => setChosen(null) };
}

/**
 * Paste a provider key (and a base URL for an OpenAI-compatible server) where the server was
 * started without one. The key goes to the server, which keeps it; the field is emptied.
 * Once a provider is configured the form folds to one line, which opens it again.
 */
export function KeyForm(props: { model: PanelModel }): JSX.Element | null {
  const { model } = props;
  const providers = model.config?.providers ?? [];
  const folding = useFolding(model);
  const { fields, set, busy, save } = useKeyForm(model, folding.reset);
  if (providers.length === 0) {
    return null;
  }
  const chosen = providers.find(p => p.name === fields.provider) ?? providers[0];
  const ready = !busy && canSave(fields, chosen);
  const status = model.keyStatus;
  return (
    <details className="jp-ci-keys" data-jupyter-ci="keys" open={folding.open || undefined}>
      <summary
        data-jupyter-ci="keys-summary"
        title={folding.open ? 'Fold the key form' : 'Change or add a provider key'}
        onClick={event => {
          // The page decides, not the browser: a re-render keeps what was chosen.
          event.preventDefault();
          folding.toggle();
        }}
      >
        <KeySummary providers={providers} open={folding.open} />
      </summary>
      <KeyList providers={providers} remove={name => void model.removeKey(name)} />
      <form
        className="jp-ci-key-form"
        autoComplete="off"
        onSubmit={event => {
          event.preventDefault();
          if (ready) {
            void save(chosen);
          }
        }}
      >
        <KeyInputs providers={providers} chosen={chosen} fields={fields} set={set} />
        <button type="submit" className="jp-mod-styled jp-mod-accept" data-jupyter-ci="key-save" disabled={!ready}>
          Save key
        </button>
      </form>
      <KeyStatus text={status.text} failed={status.failed} />
      <div className="jp-ci-key-note">
        The server keeps the key; kernels and this page never get it back.
      </div>
    </details>
  );
}
