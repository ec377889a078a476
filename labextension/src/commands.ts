/**
 * Command ids, and the commands that put an `%%ask` cell into a notebook.
 */
import type { JupyterFrontEnd } from '@jupyterlab/application';
import type { ISessionContextDialogs } from '@jupyterlab/apputils';
import { INotebookTracker, Notebook, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import type { ITranslator } from '@jupyterlab/translation';

import { askIdOf } from './cells';
import { belowLoadCell, loaderCells } from './loader';
import { METADATA_KEY } from './protocol';

export namespace CommandIDs {
  /** Insert an `%%ask` cell (args: prompt, model?, notebook? = panel id) and run it. */
  export const ask = 'jupyter-ci:ask';
  /** Interrupt the current notebook's kernel (stops a running ask). */
  export const stop = 'jupyter-ci:stop';
  /** Show the side panel. */
  export const openPanel = 'jupyter-ci:open-panel';
  /** Ask to fix the error of the active cell, in an `%%ask` cell below it (fixcell.ts). */
  export const fixCell = 'jupyter-ci:fix-cell';
  /** Let agents (MCP clients) edit and run the current notebook (notebookdoor.ts). */
  export const allowAgents = 'jupyter-ci:allow-agents';
  /** Stop letting agents edit and run the current notebook (notebookdoor.ts). */
  export const stopAgents = 'jupyter-ci:stop-agents';
}

/** Id of the side panel widget. */
export const PANEL_ID = 'jupyter-ci-panel';

/**
 * Index below the active cell; below the whole ask when the active cell is an
 * `%%ask` cell or one of its generated cells, so asks never interleave; never above the
 * `%load_ext jupyter_ci` cell (loader.ts).
 */
function insertionIndex(notebook: Notebook): number {
  const model = notebook.model;
  if (model === null || model.cells.length === 0) {
    return 0;
  }
  let index = notebook.activeCellIndex;
  if (index < 0 || index >= model.cells.length) {
    return model.cells.length;
  }
  const askId = askIdOf(model.cells.get(index).getMetadata(METADATA_KEY));
  if (askId !== null) {
    while (
      index + 1 < model.cells.length &&
      askIdOf(model.cells.get(index + 1).getMetadata(METADATA_KEY)) === askId
    ) {
      index++;
    }
  }
  return belowLoadCell(loaderCells(model), index + 1);
}

export interface IAskInserted {
  /** Id of the inserted `%%ask` cell. */
  cellId: string;
  /** Resolves when the cell has run (true: no error). */
  done: Promise<boolean>;
}

/** Insert an `%%ask` cell into this notebook and run exactly that cell. */
export function insertAndRunAsk(
  panel: NotebookPanel,
  source: string,
  dialogs: ISessionContextDialogs | null,
  translator: ITranslator | null
): IAskInserted | null {
  const notebook = panel.content;
  const model = notebook.model;
  if (model === null) {
    return null;
  }
  const index = insertionIndex(notebook);
  model.sharedModel.insertCell(index, { cell_type: 'code', source });
  const cellId = model.cells.get(index).id;
  notebook.deselectAll();
  notebook.activeCellIndex = index;
  const cell = notebook.widgets[index];
  void notebook.scrollToItem(index, 'auto');
  const done = NotebookActions.runCells(
    notebook,
    [cell],
    panel.sessionContext,
    dialogs ?? undefined,
    translator ?? undefined
  );
  return { cellId, done };
}

export interface ICommandDeps {
  tracker: INotebookTracker;
  /** Insert and run an ask in the given notebook (the panel also records it). */
  ask: (panel: NotebookPanel, prompt: string, model: string | null) => IAskInserted | null;
}

/** Register the commands. */
export function addCommands(app: JupyterFrontEnd, deps: ICommandDeps): void {
  const { commands, shell } = app;
  const { tracker } = deps;

  const notebookFor = (id: unknown): NotebookPanel | null => {
    if (typeof id === 'string' && id) {
      return tracker.find(panel => panel.id === id) ?? null;
    }
    return tracker.currentWidget;
  };

  commands.addCommand(CommandIDs.ask, {
    label: 'Ask jupyter-ci in a new %%ask cell',
    describedBy: {
      args: {
        type: 'object',
        properties: {
          prompt: { type: 'string' },
          model: { type: 'string' },
          notebook: { type: 'string', description: 'id of the notebook panel' }
        },
        required: ['prompt']
      }
    },
    isEnabled: args => notebookFor(args.notebook) !== null,
    execute: args => {
      const panel = notebookFor(args.notebook);
      const prompt = typeof args.prompt === 'string' ? args.prompt : '';
      if (panel === null || !prompt.trim()) {
        return null;
      }
      const model = typeof args.model === 'string' && args.model ? args.model : null;
      const inserted = deps.ask(panel, prompt, model);
      return inserted === null ? null : { cellId: inserted.cellId };
    }
  });

  commands.addCommand(CommandIDs.stop, {
    label: 'Stop the running ask (interrupt the kernel)',
    isEnabled: () => !!tracker.currentWidget?.sessionContext.session?.kernel,
    execute: async () => {
      await tracker.currentWidget?.sessionContext.session?.kernel?.interrupt();
    }
  });

  commands.addCommand(CommandIDs.openPanel, {
    label: 'Open the jupyter-ci panel',
    execute: () => {
      shell.activateById(PANEL_ID);
    }
  });
}
