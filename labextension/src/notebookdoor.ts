/**
 * The page's side of the notebook door (docs/protocol.md section 5): agents edit and run cells
 * of the user's notebooks through the server, with the user's consent. Opening a notebook here
 * is that consent, by the server's default setting, so the page tells the server each notebook
 * the user opened (and its new path when renamed); two commands (doorcommands.ts) let agents
 * into one notebook, or stop letting them, whatever the setting says.
 *
 * "Opened" means the user's own gesture in it (a click or a key in the notebook, which a
 * script cannot fake: `isTrusted`), never a navigation: a web page that sends the browser to
 * `/lab/tree/<notebook>` makes JupyterLab open it, and that alone grants nothing.
 */
import type { DocumentRegistry } from '@jupyterlab/docregistry';
import type { INotebookModel } from '@jupyterlab/notebook';

import { INotebookConsent, notebookConsent, notebookOpened, setNotebookConsent } from './api';

/** The server calls of the door, replaced in tests. */
export interface IDoorApi {
  opened(path: string): Promise<void>;
  consent(path: string): Promise<INotebookConsent>;
  setConsent(path: string, allow: boolean): Promise<INotebookConsent>;
}

const SERVER: IDoorApi = {
  opened: notebookOpened,
  consent: notebookConsent,
  setConsent: setNotebookConsent
};

/** Say in a sentence what the server's answer about a notebook means. */
export function consentText(state: INotebookConsent): string {
  const may = state.allowed ? 'Agents may edit and run' : 'Agents may not edit or run';
  const setting = `c.JupyterCI.agent_notebooks = '${state.setting}'`;
  const why: Record<string, string> = {
    allowed: 'you let them',
    opened: 'you opened it in JupyterLab since the server started',
    not_opened: 'you neither opened it in JupyterLab since the server started nor let them',
    not_allowed: `you did not let them (${setting})`,
    always: `the server lets agents into every notebook (${setting})`,
    never: `the server lets agents into no notebook (${setting})`
  };
  const reason = why[state.why] ?? state.why;
  return `${may} ${state.path}${reason ? `: ${reason}` : ''}.`;
}

/** What this page knows of the door: the consent of the notebooks it asked about. */
export class NotebookDoor {
  constructor(
    private readonly _localPath: (path: string) => string,
    private readonly _api: IDoorApi = SERVER
  ) {}

  /** Called when what a notebook's consent says may have changed. */
  onChange: () => void = () => undefined;

  /**
   * Tell the server of a notebook the user opened here: after their first gesture in it
   * (`gesture`), and at each rename after that. Until then the page only reads its consent.
   */
  follow(context: DocumentRegistry.IContext<INotebookModel>, gesture: Promise<void>): void {
    let touched = false;
    const tell = (): void => {
      if (!context.isDisposed) {
        const path = this._localPath(context.path);
        void this._api.opened(path).then(() => this.refresh(path));
      }
    };
    void context.ready.then(() => {
      if (!context.isDisposed) {
        void this.refresh(context.path);
      }
    });
    void Promise.all([context.ready, gesture]).then(() => {
      touched = true;
      tell();
    });
    context.pathChanged.connect(() => (touched ? tell() : void this.refresh(context.path)));
  }

  /** What the server said last of a notebook's consent (null: not asked yet, or no route). */
  consent(path: string): INotebookConsent | null {
    return this._known.get(this._localPath(path)) ?? null;
  }

  /** Ask the server again about one notebook (quietly: an older server has no route). */
  async refresh(path: string): Promise<void> {
    const local = this._localPath(path);
    try {
      this._known.set(local, await this._api.consent(local));
    } catch {
      this._known.delete(local);
    }
    this.onChange();
  }

  /** Let agents edit and run a notebook, or stop letting them; return the server's answer. */
  async set(path: string, allow: boolean): Promise<INotebookConsent> {
    const local = this._localPath(path);
    const state = await this._api.setConsent(local, allow);
    this._known.set(local, state);
    this.onChange();
    return state;
  }

  private readonly _known = new Map<string, INotebookConsent>();
}

/** Resolve at the user's first click or key in `node` (a script's events do not count). */
export function userGesture(node: EventTarget): Promise<void> {
  return new Promise(resolve => {
    const seen = (event: Event): void => {
      if (event.isTrusted) {
        node.removeEventListener('pointerdown', seen, true);
        node.removeEventListener('keydown', seen, true);
        resolve();
      }
    };
    node.addEventListener('pointerdown', seen, true);
    node.addEventListener('keydown', seen, true);
  });
}
