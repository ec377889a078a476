/**
 * A notebook's box in JupyterLab (box.ts has the words): a status bar item that says whether
 * the current notebook's kernel is boxed; the commands "Run this notebook unboxed" and "Run
 * this notebook boxed", which change the kernel after saying what that means; and, after a
 * cell runs, "Allow <host> for this notebook" for each host its box refused, once per host
 * and notebook. What the user allows is kept by the server, never in the notebook file.
 */
import type { JupyterFrontEnd } from '@jupyterlab/application';
import { Dialog, Notification, showDialog, showErrorMessage } from '@jupyterlab/apputils';
import { INotebookTracker, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import type { IStatusBar } from '@jupyterlab/statusbar';
import { Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import { allowBoxHost, boxStatus, IBoxStatus, setNotebookBoxed } from './api';
import {
  badgeText,
  BOX_LABEL,
  BOX_NOTE,
  boxLine,
  HostOffers,
  refusedText,
  UNBOX_LABEL,
  UNBOX_WARNING
} from './box';

export namespace BoxCommandIDs {
  /** Restart the current notebook's kernel without a box (after a warning). */
  export const unbox = 'jupyter-ci:run-unboxed';
  /** Restart the current notebook's kernel in a box. */
  export const box = 'jupyter-ci:run-boxed';
}

/** What the server said of each notebook's kernel box, read again when it may have changed. */
export class BoxWatch {
  constructor(private readonly _tracker: INotebookTracker) {
    _tracker.widgetAdded.connect((_, panel) => this._follow(panel));
    _tracker.forEach(panel => this._follow(panel));
    NotebookActions.executed.connect((_, { notebook }) => {
      const panel = this._tracker.find(p => p.content === notebook);
      if (panel) {
        void this.refresh(panel, true);
      }
    });
  }

  /** Emitted when what is known of a notebook's box changed. */
  readonly changed = new Signal<this, NotebookPanel>(this);

  /** What the server said last of this notebook's kernel (null: nothing yet, no kernel). */
  status(panel: NotebookPanel | null): IBoxStatus | null {
    return panel ? (this._known.get(panel) ?? null) : null;
  }

  /** Ask the server about the notebook's kernel; after a run, offer the hosts it refused. */
  async refresh(panel: NotebookPanel, offer = false): Promise<void> {
    const kernel = panel.sessionContext.session?.kernel?.id;
    const status = kernel ? await boxStatus(kernel) : null;
    if (panel.isDisposed) {
      return;
    }
    this._known.set(panel, status);
    this.changed.emit(panel);
    if (offer && status?.boxed) {
      const notebook = status.notebook || panel.context.localPath;
      for (const host of this._offers.take(notebook, status.refused)) {
        this._offer(panel, notebook, host);
      }
    }
  }

  private _follow(panel: NotebookPanel): void {
    const session = panel.sessionContext;
    const again = (): void => void this.refresh(panel);
    // A new kernel (changed, or started at last); a restart keeps the kernel and its box.
    session.kernelChanged.connect(again);
    void session.ready.then(again);
  }

  private _offer(panel: NotebookPanel, notebook: string, host: string): void {
    Notification.warning(refusedText(notebook, host), {
      autoClose: false,
      actions: [
        {
          label: `Allow ${host} for this notebook`,
          caption: 'Its box may reach this host now and at its next kernels',
          callback: () => void this._allow(panel, notebook, host)
        }
      ]
    });
  }

  private async _allow(panel: NotebookPanel, notebook: string, host: string): Promise<void> {
    try {
      await allowBoxHost(notebook, host);
    } catch (error) {
      void showErrorMessage(`Could not allow ${host}`, String(error));
      return;
    }
    Notification.success(`${host} is allowed for ${notebook}: run the cell again.`, {
      autoClose: 8000
    });
    await this.refresh(panel);
  }

  private readonly _known = new WeakMap<NotebookPanel, IBoxStatus | null>();
  private readonly _offers = new HostOffers();
}

/** The status bar's item: "Boxed" or "Unboxed" for the current notebook; a click switches. */
class BoxBadge extends Widget {
  constructor(
    private readonly _watch: BoxWatch,
    private readonly _tracker: INotebookTracker,
    private readonly _app: JupyterFrontEnd
  ) {
    super({ node: document.createElement('button') });
    this.addClass('jp-ci-box-badge');
    this.node.dataset.jupyterCi = 'box-badge';
    this.node.addEventListener('click', () => {
      const status = this._watch.status(this._tracker.currentWidget);
      const command = status?.boxed ? BoxCommandIDs.unbox : BoxCommandIDs.box;
      if (this._app.commands.isEnabled(command)) {
        void this._app.commands.execute(command);
      }
    });
    _watch.changed.connect(this.update, this);
    _tracker.currentChanged.connect(this.update, this);
    this.update();
  }

  protected override onUpdateRequest(): void {
    const status = this._watch.status(this._tracker.currentWidget);
    this.node.textContent = badgeText(status);
    this.node.title = boxLine(status);
    this.node.dataset.boxed = status === null ? '' : String(status.boxed);
    this.node.hidden = status === null;
  }
}

/** Restart `panel`'s kernel boxed or not, once the user agreed and the server took it. */
async function switchBox(watch: BoxWatch, panel: NotebookPanel, boxed: boolean): Promise<void> {
  const name = panel.context.localPath;
  const result = await showDialog({
    title: `${boxed ? BOX_LABEL : UNBOX_LABEL}?`,
    body: boxed ? BOX_NOTE : UNBOX_WARNING,
    buttons: [
      Dialog.cancelButton(),
      boxed ? Dialog.okButton({ label: 'Run boxed' }) : Dialog.warnButton({ label: 'Run unboxed' })
    ]
  });
  if (!result.button.accept) {
    return;
  }
  const session = panel.sessionContext;
  try {
    await setNotebookBoxed(watch.status(panel)?.notebook || name, boxed);
    // A new kernel of the same kernelspec: the server places it as the notebook now says.
    await session.changeKernel({ name: session.session?.kernel?.name ?? session.kernelPreference.name });
  } catch (error) {
    void showErrorMessage(boxed ? BOX_LABEL : UNBOX_LABEL, String(error));
  }
  await watch.refresh(panel);
}

/** Add the badge and the two commands; return the watch (the panel shows its line). */
export function addBoxes(
  app: JupyterFrontEnd,
  tracker: INotebookTracker,
  statusBar: IStatusBar | null
): BoxWatch {
  const watch = new BoxWatch(tracker);
  const current = () => watch.status(tracker.currentWidget);
  app.commands.addCommand(BoxCommandIDs.unbox, {
    label: UNBOX_LABEL,
    caption: 'Restart this notebook’s kernel outside its box, with all your rights',
    isEnabled: () => current()?.boxed === true && current()?.may_unbox === true,
    execute: () => tracker.currentWidget && switchBox(watch, tracker.currentWidget, false)
  });
  app.commands.addCommand(BoxCommandIDs.box, {
    label: BOX_LABEL,
    caption: 'Restart this notebook’s kernel in a box',
    isEnabled: () => current()?.boxed === false,
    execute: () => tracker.currentWidget && switchBox(watch, tracker.currentWidget, true)
  });
  watch.changed.connect(() => app.commands.notifyCommandChanged());
  statusBar?.registerStatusItem('jupyter-ci:box', {
    item: new BoxBadge(watch, tracker, app),
    align: 'left',
    rank: 5,
    isActive: () => tracker.currentWidget !== null
  });
  return watch;
}
