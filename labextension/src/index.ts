/**
 * The jupyter-ci JupyterLab / Notebook 7 plugin: wires the pieces together.
 */
import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette, ISessionContextDialogs } from '@jupyterlab/apputils';
import { IConsoleTracker } from '@jupyterlab/console';
import {
  INotebookModel,
  INotebookTracker,
  NotebookActions,
  NotebookPanel
} from '@jupyterlab/notebook';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';
import { ITranslator } from '@jupyterlab/translation';

import { AgentCells } from './agentcells';
import { AskWriters, sharedAwareness } from './askwriters';
import { boxLine } from './box';
import { renderUntrustedWhen } from './boxedrender';
import { addBoxes, BoxCommandIDs } from './boxui';
import { NotebookComm } from './comm';
import { addCommands, CommandIDs, insertAndRunAsk, PANEL_ID } from './commands';
import { guardConsoles } from './consoletrust';
import { Conversations } from './conversationstore';
import { CellDecorator } from './decoration';
import { addFixCommand } from './fixcell';
import { FrontendAnnouncer } from './frontend';
import { holdKernelInfoOfNewModels, keepCleanOnKernelInfo } from './kernelmetadata';
import { KernelMarks, KernelMarksFollower } from './outputtrust';
import { askIcon, AskPanel } from './panel';
import { PanelModel } from './panelmodel';
import { PendingAsks } from './pendingasks';
import { addDoorCommands } from './doorcommands';
import { NotebookDoor, userGesture } from './notebookdoor';
import { manageQuestions } from './questions';
import { notebookCells, recordedAsks } from './records';
import { inertSvgRendererFactory } from './svg';
import { ITrustPolicy, runsModelCode, TrustGuard, vouchDuring } from './trust';

const PLUGIN_ID = 'jupyter-ci:plugin';

/** Attach comm handling and the frontend announcement once per notebook document. */
function manageNotebooks(
  tracker: INotebookTracker,
  conversations: Conversations,
  policy: ITrustPolicy,
  marks: KernelMarks,
  door: NotebookDoor
): void {
  const managed = new WeakSet<object>();
  const manage = (panel: NotebookPanel): void => {
    new CellDecorator(panel.content);
    const session = panel.sessionContext;
    const kernelState = () => marks.state(session.session?.kernel?.id);
    renderUntrustedWhen(panel.content.rendermime, () => kernelState() === 'sandboxed');
    const context = panel.context;
    const conversation = conversations.get(context);
    // Questions (steps, plans, edits) with their buttons in this view's cells (questions.ts).
    const questions = manageQuestions(tracker, panel, conversation);
    if (managed.has(context)) {
      return; // another view of the same document
    }
    managed.add(context);
    keepCleanOnKernelInfo(panel); // opening a notebook does not modify it
    // Once the user clicks or types in it, they opened it: the server hears of it (consent,
    // notebookdoor.ts); a page that only navigated here grants nothing.
    door.follow(context, userGesture(panel.node));
    const model = () => (context.isDisposed ? null : context.model);
    const reveal = revealer(tracker, panel);
    const following = new KernelMarksFollower(session, marks);
    const guard = new TrustGuard(context.model, policy, kernelState);
    guards.set(context.model, guard);
    // Cells an agent wrote or ran through the server, into the notebook shared with it.
    const kernelId = (): string | null => session.session?.kernel?.id ?? null;
    const agents = context.model.collaborative
      ? new AgentCells({ model: context.model, guard, marks, kernelId, loaded: context.ready })
      : null;
    // A browser that did not see the notebook's asks (another one) shows them from its records.
    void context.ready.then(() => {
      if (!context.isDisposed) {
        conversation.addRecorded(recordedAsks(notebookCells(context.model)));
      }
    });
    const views = { conversation, trust: guard, reveal, questions };
    // One page of those sharing the notebook (real-time collaboration) writes an ask's cells.
    const writers = new AskWriters(sharedAwareness(context.model));
    const comm = new NotebookComm(panel.sessionContext, model, views, marks, writers);
    const announcer = new FrontendAnnouncer(panel.sessionContext, model);
    context.disposed.connect(() => {
      comm.dispose();
      announcer.dispose();
      guard.dispose();
      following.dispose();
      agents?.dispose();
    });
  };
  const guards = new WeakMap<INotebookModel, TrustGuard>();
  tracker.forEach(manage);
  tracker.widgetAdded.connect((_, panel) => manage(panel));
  guardRuns(tracker, guards, marks);
}

/** Scroll a cell into the view of its notebook the user looks at, else into `panel`'s. */
function revealer(tracker: INotebookTracker, panel: NotebookPanel): (cellId: string) => void {
  return cellId => {
    const current = tracker.currentWidget;
    const view = current?.context === panel.context ? current : panel;
    const index = view.content.widgets.findIndex(w => w.model.id === cellId);
    if (index >= 0 && !view.isDisposed) {
      void view.content.scrollToItem(index, 'smart');
    }
  };
}

/**
 * Before each run: running an ask's, a generated or an agent's cell puts model-written code
 * in its kernel (marked, outputtrust.ts), and a cell of such a kernel runs untrusted.
 */
function guardRuns(
  tracker: INotebookTracker,
  guards: WeakMap<INotebookModel, TrustGuard>,
  marks: KernelMarks
): void {
  NotebookActions.executionScheduled.connect((_, { notebook, cell }) => {
    const kernel = tracker.find(p => p.content === notebook)?.sessionContext.session?.kernel;
    if (kernel && runsModelCode(cell.model)) {
      marks.mark(kernel.id);
    }
    if (notebook.model !== null) {
      guards.get(notebook.model)?.scheduled(cell.model);
    }
  });
}

/** Put the side panel into the right area (restored where the layout had it). */
function addPanel(
  app: JupyterFrontEnd,
  model: PanelModel,
  rendermime: IRenderMimeRegistry,
  restorer: ILayoutRestorer | null
): void {
  const panel = new AskPanel(model, rendermime, app.commands);
  panel.id = PANEL_ID;
  panel.title.icon = askIcon;
  panel.title.caption = 'jupyter-ci: ask in the current notebook';
  app.shell.add(panel, 'right', { rank: 600 });
  restorer?.add(panel, PANEL_ID);
}

/** Apply the settings (the panel's model, the trust of generated outputs) now and on change. */
function followSettings(registry: ISettingRegistry, model: PanelModel, policy: ITrustPolicy): void {
  registry
    .load(PLUGIN_ID)
    .then(settings => {
      model.settings = settings;
      const read = () => {
        const value = settings.get('model').composite;
        model.setPickedFromSettings(typeof value === 'string' ? value : '');
        policy.trustGenerated = settings.get('trustGeneratedOutputs').composite === true;
      };
      read();
      settings.changed.connect(read);
    })
    .catch(error => console.error('jupyter-ci: could not load settings', error));
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'Generated %%ask steps become notebook cells; a side panel to ask from.',
  autoStart: true,
  requires: [INotebookTracker, IRenderMimeRegistry],
  optional: [
    ISettingRegistry,
    ISessionContextDialogs,
    ITranslator,
    ICommandPalette,
    ILayoutRestorer,
    IConsoleTracker,
    IStatusBar
  ],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    rendermime: IRenderMimeRegistry,
    settingRegistry: ISettingRegistry | null,
    dialogs: ISessionContextDialogs | null,
    translator: ITranslator | null,
    palette: ICommandPalette | null,
    restorer: ILayoutRestorer | null,
    consoles: IConsoleTracker | null,
    statusBar: IStatusBar | null
  ): void => {
    const conversations = new Conversations(
      typeof window !== 'undefined' && window.localStorage ? window.localStorage : null
    );
    // Model-written output never runs script: untrusted cells (trust.ts), whose SVG still
    // shows, as an image (svg.ts). Trust given through "Trust Notebook" is the user's.
    const policy: ITrustPolicy = { trustGenerated: false };
    rendermime.addFactory(inertSvgRendererFactory);
    app.commands.commandExecuted.connect((_, executed) => {
      if (executed.id === 'notebook:trust') {
        vouchDuring(executed.result);
      }
    });
    // Nor does any output of a kernel once model-written code ran in it, in any cell
    // (outputtrust.ts), nor ever a sandboxed kernel's.
    const marks = new KernelMarks();
    // Opening a shared notebook does not make the server save it (kernelmetadata.ts).
    holdKernelInfoOfNewModels(app.docRegistry.getModelFactory('notebook'));
    const contents = app.serviceManager.contents;
    const door = new NotebookDoor(path => contents.localPath(path));
    manageNotebooks(tracker, conversations, policy, marks, door);
    addDoorCommands(app, tracker, door);
    if (consoles !== null) {
      guardConsoles(consoles, marks, policy);
    }

    const { ask } = new PendingAsks(conversations, (panel, source) =>
      insertAndRunAsk(panel, source, dialogs, translator)
    );
    addCommands(app, { tracker, ask });

    // Whether each notebook's kernel is boxed: the status bar, two commands, allowed hosts.
    const boxes = addBoxes(app, tracker, statusBar);
    const boxLineOf = (panel: NotebookPanel) => boxLine(boxes.status(panel));
    const model = new PanelModel({ tracker, conversations, ask, contents, boxLine: boxLineOf });
    boxes.changed.connect(() => model.stateChanged.emit());
    // "Fix" in the cell toolbar and the panel asks with the model the panel picked.
    addFixCommand(app, { tracker, ask, model: () => model.pickedModel || null, icon: askIcon });
    addPanel(app, model, rendermime, restorer);
    void model.refreshConfig();
    if (settingRegistry !== null) {
      followSettings(settingRegistry, model, policy);
    }

    const inPalette = [CommandIDs.openPanel, CommandIDs.stop, CommandIDs.allowAgents,
      CommandIDs.stopAgents, BoxCommandIDs.unbox, BoxCommandIDs.box];
    inPalette.forEach(command => palette?.addItem({ command, category: 'jupyter-ci' }));
  }
};

export default plugin;
