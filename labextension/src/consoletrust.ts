/**
 * A console's cells follow the rule of a notebook's (outputtrust.ts): once model-written code
 * ran in its kernel, the trust a run gives a cell goes, until the kernel restarts; in a
 * sandboxed kernel, always. A console often shares a notebook's kernel ("New Console for
 * Notebook"), where a step's hooks reach it as they reach the notebook's own cells.
 */
import type { CellModel, ICellModel } from '@jupyterlab/cells';
import type { ConsolePanel, IConsoleTracker } from '@jupyterlab/console';

import { renderUntrustedWhen } from './boxedrender';
import { KernelMarks, KernelMarksFollower } from './outputtrust';
import { ITrustPolicy, runsModelCode, untrust } from './trust';

/** Guard the cells of every console the tracker has and will have. */
export function guardConsoles(
  tracker: IConsoleTracker,
  marks: KernelMarks,
  policy: ITrustPolicy
): void {
  const manage = (panel: ConsolePanel): void => {
    const session = panel.sessionContext;
    const following = new KernelMarksFollower(session, marks);
    // Each console has its own clone of the registry (ConsolePanel makes it).
    renderUntrustedWhen(
      panel.console.rendermime,
      () => marks.state(session.session?.kernel?.id) === 'sandboxed'
    );
    const onTrusted = (model: ICellModel): void => {
      const kernel = session.session?.kernel?.id;
      if (!model.trusted) {
        return;
      }
      if (kernel && runsModelCode(model)) {
        marks.mark(kernel); // an ask typed in the console
      }
      const state = marks.state(kernel);
      if (state === 'sandboxed' || (state !== 'clean' && !policy.trustGenerated)) {
        untrust(model);
      }
    };
    const watch = (model: ICellModel): void => {
      (model as CellModel).stateChanged.connect((_, change) => {
        if (change.name === 'trusted') {
          onTrusted(model);
        }
      });
    };
    const prompt = panel.console.promptCell;
    if (prompt !== null) {
      watch(prompt.model);
    }
    panel.console.promptCellCreated.connect((_, cell) => watch(cell.model));
    panel.disposed.connect(() => following.dispose());
  };
  tracker.forEach(manage);
  tracker.widgetAdded.connect((_, panel) => manage(panel));
}
