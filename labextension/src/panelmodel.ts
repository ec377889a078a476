/**
 * State of the side panel: the current notebook, its kernel, its conversation, the model.
 */
import type { ISessionContext } from '@jupyterlab/apputils';
import type { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import type { Contents } from '@jupyterlab/services';
import type { ISettingRegistry } from '@jupyterlab/settingregistry';
import { VDomModel } from '@jupyterlab/ui-components';

import { ApiError, fetchConfig, IKeyRequest, IServerConfig, removeKey, saveKey } from './api';
import type { IAskInserted } from './commands';
import type { Conversation } from './conversation';
import type { Conversations } from './conversationstore';
import { IAttached, mentionFiles, uploadFile } from './upload';

export type MessageKind = 'no-notebook' | 'no-kernel' | 'no-model' | 'config' | 'upload';

export interface IPanelMessage {
  kind: MessageKind;
  text: string;
}

export interface IPanelModelOptions {
  tracker: INotebookTracker;
  conversations: Conversations;
  ask: (panel: NotebookPanel, prompt: string, model: string | null) => IAskInserted | null;
  /** Where uploads go (the application's contents manager). */
  contents?: Contents.IManager;
  /** What the notebook's kernel box means, in a line (boxui.ts); '' when unknown. */
  boxLine?: (panel: NotebookPanel) => string;
}

const NO_KERNEL_STATUSES = new Set(['dead', 'terminating']);

export class PanelModel extends VDomModel {
  constructor(private readonly _options: IPanelModelOptions) {
    super();
    _options.tracker.currentChanged.connect(this._onCurrentChanged, this);
    this._onCurrentChanged();
  }

  get notebook(): NotebookPanel | null {
    return this._notebook;
  }

  /** Whether the current notebook's kernel is boxed, in a line ('' when unknown). */
  get boxLine(): string {
    return this._notebook && this._options.boxLine ? this._options.boxLine(this._notebook) : '';
  }

  get conversation(): Conversation | null {
    return this._notebook ? this._options.conversations.get(this._notebook.context) : null;
  }

  get config(): IServerConfig | null {
    return this._config;
  }

  /** The model picked in the panel ('' = the server's default). */
  get pickedModel(): string {
    return this._picked;
  }

  /** Whether the model-key form should be open: no model is usable yet. */
  get needsKey(): boolean {
    const config = this._config;
    return config !== null && (config.problem !== null || config.models.length === 0);
  }

  /** What the last key save said ('' before any), and whether it failed. */
  get keyStatus(): { text: string; failed: boolean } {
    return this._keyStatus;
  }

  /**
   * Send a pasted key to the server, which checks it with the provider and keeps it; return
   * whether it was taken. The key is not kept here: the form clears its field at once.
   */
  async saveKey(request: IKeyRequest): Promise<boolean> {
    const label = (config: IServerConfig | null): string =>
      config?.providers.find(p => p.name === request.provider)?.label ?? request.provider;
    this._keyStatus = { text: `Checking with ${label(this._config)}…`, failed: false };
    this.stateChanged.emit();
    try {
      const { config, saved, check } = await saveKey(request);
      this._config = config;
      this._configError = null;
      const what = request.key.trim() ? 'key' : 'base URL';
      const where = saved ? `held by the server; ${saved}` : 'held by the server until it stops';
      this._keyStatus = {
        text: `${label(config)} ${what} saved (${where}).${check.message ? ` ${check.message}` : ''}`,
        failed: !check.ok
      };
      return true;
    } catch (error) {
      this._keyStatus = {
        text: error instanceof ApiError ? error.message : String(error),
        failed: true
      };
      return false;
    } finally {
      this.stateChanged.emit();
    }
  }

  /** Have the server forget a provider's key and base URL; say what it removed. */
  async removeKey(provider: string): Promise<void> {
    try {
      const { config, removed } = await removeKey(provider);
      this._config = config;
      this._configError = null;
      this._keyStatus = { text: removed, failed: false };
    } catch (error) {
      this._keyStatus = {
        text: error instanceof ApiError ? error.message : String(error),
        failed: true
      };
    } finally {
      this.stateChanged.emit();
    }
  }

  /** Files uploaded for the next ask (it mentions them). */
  get attached(): readonly IAttached[] {
    return this._attached;
  }

  /** Uploads still under way. */
  get uploading(): number {
    return this._uploading;
  }

  get canAttach(): boolean {
    return this._notebook !== null && this._options.contents !== undefined;
  }

  /** Upload files into the current notebook's `data/` folder, for the next ask. */
  async attach(files: File[]): Promise<void> {
    const notebook = this._notebook;
    const contents = this._options.contents;
    if (notebook === null || contents === undefined || files.length === 0) {
      return;
    }
    this._uploadError = null;
    this._uploading += files.length;
    this.stateChanged.emit();
    for (const file of files) {
      try {
        this._attached = [...this._attached, await uploadFile(contents, notebook.context.path, file)];
      } catch (error) {
        this._uploadError = `Could not upload ${file.name}: ${String(error)}`;
      } finally {
        this._uploading--;
        this.stateChanged.emit();
      }
    }
  }

  /** Leave an uploaded file out of the next ask (the file stays where it is). */
  detach(path: string): void {
    this._attached = this._attached.filter(file => file.path !== path);
    this.stateChanged.emit();
  }

  get hasKernel(): boolean {
    const session = this._notebook?.sessionContext;
    if (!session?.session?.kernel) {
      return false;
    }
    return !NO_KERNEL_STATUSES.has(session.kernelDisplayStatus);
  }

  get canStop(): boolean {
    const session = this._notebook?.sessionContext;
    if (!this.hasKernel || !session) {
      return false;
    }
    return session.kernelDisplayStatus === 'busy' || (this.conversation?.busy ?? false);
  }

  get messages(): IPanelMessage[] {
    const out: IPanelMessage[] = [];
    const notebook = this._notebook;
    if (notebook === null) {
      out.push({ kind: 'no-notebook', text: 'Open a notebook to ask: asks run in its kernel.' });
    } else if (!this.hasKernel) {
      out.push({ kind: 'no-kernel', text: this._noKernelText(notebook.sessionContext) });
    }
    if (this._uploadError !== null) {
      out.push({ kind: 'upload', text: this._uploadError });
    }
    if (this._configError !== null) {
      out.push({ kind: 'config', text: this._configError });
    } else if (this._config !== null) {
      if (this._config.problem) {
        out.push({ kind: 'no-model', text: this._config.problem });
      } else if (this._config.models.length === 0 && !this._config.default_model) {
        out.push({
          kind: 'no-model',
          text: 'No model is configured: set a provider key (e.g. OPENAI_API_KEY) for the Jupyter server.'
        });
      }
    }
    return out;
  }

  /** Use the setting's stored value (called on load and on change). */
  setPickedFromSettings(value: string): void {
    if (value !== this._picked) {
      this._picked = value;
      this.stateChanged.emit();
    }
  }

  /** Store a new pick (in the settings registry when there is one). */
  async pickModel(value: string): Promise<void> {
    this.setPickedFromSettings(value);
    await this._settings?.set('model', value);
  }

  set settings(settings: ISettingRegistry.ISettings | null) {
    this._settings = settings;
  }

  async refreshConfig(): Promise<void> {
    try {
      this._config = await fetchConfig();
      this._configError = null;
    } catch (error) {
      this._config = null;
      this._configError = error instanceof ApiError ? error.message : String(error);
    }
    this.stateChanged.emit();
  }

  /** Ask in the notebook that is current now; return whether it was sent. */
  send(prompt: string): boolean {
    const notebook = this._notebook;
    if (notebook === null || !prompt.trim() || !this.hasKernel || this._uploading > 0) {
      return false;
    }
    const model = this._picked || null;
    const inserted = this._options.ask(notebook, mentionFiles(prompt, this._attached), model);
    if (inserted !== null && this._attached.length > 0) {
      this._attached = [];
      this.stateChanged.emit();
    }
    return inserted !== null;
  }

  async stop(): Promise<void> {
    await this._notebook?.sessionContext.session?.kernel?.interrupt();
  }

  override dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._bind(null);
    this._options.tracker.currentChanged.disconnect(this._onCurrentChanged, this);
    super.dispose();
  }

  private _noKernelText(session: ISessionContext): string {
    const name = this._notebook?.title.label ?? 'this notebook';
    if (session.kernelDisplayStatus === 'dead') {
      return `The kernel of ${name} is dead: restart it to ask.`;
    }
    return `No kernel is running for ${name}: start one (Kernel › Change Kernel…) to ask.`;
  }

  private _onCurrentChanged(): void {
    this._bind(this._options.tracker.currentWidget);
    this.stateChanged.emit();
  }

  private _bind(notebook: NotebookPanel | null): void {
    const old = this._notebook;
    if (old !== null) {
      old.sessionContext.statusChanged.disconnect(this._emit, this);
      old.sessionContext.kernelChanged.disconnect(this._emit, this);
      old.sessionContext.connectionStatusChanged.disconnect(this._emit, this);
      old.title.changed.disconnect(this._emit, this);
      this.conversation?.changed.disconnect(this._emit, this);
    }
    if (notebook !== old) {
      // Uploads went beside the other notebook: they are not this one's.
      this._attached = [];
      this._uploadError = null;
    }
    this._notebook = notebook;
    if (notebook !== null) {
      notebook.sessionContext.statusChanged.connect(this._emit, this);
      notebook.sessionContext.kernelChanged.connect(this._emit, this);
      notebook.sessionContext.connectionStatusChanged.connect(this._emit, this);
      notebook.title.changed.connect(this._emit, this);
      this.conversation?.changed.connect(this._emit, this);
      notebook.disposed.connect(this._onNotebookDisposed, this);
    }
  }

  private _onNotebookDisposed(notebook: NotebookPanel): void {
    if (notebook === this._notebook) {
      this._bind(null);
      this.stateChanged.emit();
    }
  }

  private _emit(): void {
    this.stateChanged.emit();
  }

  private _notebook: NotebookPanel | null = null;
  private _config: IServerConfig | null = null;
  private _configError: string | null = null;
  private _picked = '';
  private _keyStatus = { text: '', failed: false };
  private _attached: IAttached[] = [];
  private _uploading = 0;
  private _uploadError: string | null = null;
  private _settings: ISettingRegistry.ISettings | null = null;
}
