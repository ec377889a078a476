/**
 * The commands that let agents edit and run the current notebook, or stop letting them
 * (notebookdoor.ts holds what the server said of each notebook).
 */
import type { JupyterFrontEnd } from '@jupyterlab/application';
import { Notification, showErrorMessage } from '@jupyterlab/apputils';
import type { INotebookTracker } from '@jupyterlab/notebook';

import { ApiError } from './api';
import { CommandIDs } from './commands';
import { consentText, NotebookDoor } from './notebookdoor';

/** Add the two consent commands for the current notebook, their state from the door. */
export function addDoorCommands(
  app: JupyterFrontEnd,
  tracker: INotebookTracker,
  door: NotebookDoor
): void {
  const { commands } = app;
  const current = (): string | null => tracker.currentWidget?.context.path ?? null;
  const allowed = (): boolean => {
    const path = current();
    return path !== null && door.consent(path)?.allowed === true;
  };
  const change = (allow: boolean) => async (): Promise<void> => {
    const path = current();
    if (path === null) {
      return;
    }
    try {
      Notification.info(consentText(await door.set(path, allow)), { autoClose: 8000 });
    } catch (error) {
      const message = error instanceof ApiError ? error.message : String(error);
      await showErrorMessage('jupyter-ci: agents in this notebook', message);
    }
  };
  commands.addCommand(CommandIDs.allowAgents, {
    label: 'Let agents edit and run this notebook',
    caption: 'Agents (MCP clients) may insert, edit and run cells of this notebook.',
    isEnabled: () => current() !== null,
    isToggled: allowed,
    execute: change(true)
  });
  commands.addCommand(CommandIDs.stopAgents, {
    label: 'Stop letting agents edit and run this notebook',
    caption: 'Agents (MCP clients) may no longer change or run this notebook.',
    isEnabled: () => current() !== null && door.consent(current() ?? '')?.allowed !== false,
    execute: change(false)
  });
  door.onChange = () => {
    commands.notifyCommandChanged(CommandIDs.allowAgents);
    commands.notifyCommandChanged(CommandIDs.stopAgents);
  };
  tracker.currentChanged.connect((_, panel) => {
    if (panel !== null) {
      void panel.context.ready.then(() => door.refresh(panel.context.path));
    }
  });
}
