/**
 * The panel's Fix button: shown while the active cell of the current notebook shows an
 * error (fixcell.ts asks to fix it).
 *
 * It has a `data-jupyter-ci` attribute for browser tests.
 */
import type { NotebookPanel } from '@jupyterlab/notebook';
import type { ISignal } from '@lumino/signaling';
import * as React from 'react';

import { erroredCell } from './fixcell';

/** A Fix button while the active cell of the current notebook shows an error. */
export function FixButton(props: {
  notebook: NotebookPanel | null;
  fix: (() => void) | null;
}): JSX.Element | null {
  const { notebook, fix } = props;
  const [, setTick] = React.useState(0);
  React.useEffect(() => {
    const content = notebook?.content;
    if (!content) {
      return;
    }
    const bump = (): void => setTick(tick => tick + 1);
    let outputs: ISignal<unknown, unknown> | null = null;
    const watch = (): void => {
      outputs?.disconnect(bump);
      const model = content.activeCell?.model;
      // A disposed model (a cell deleted or moved) has no outputs any more.
      const held = model?.type === 'code' ? (model as unknown as IHasOutputs).outputs : null;
      outputs = held?.changed ?? null;
      outputs?.connect(bump);
      bump();
    };
    content.activeCellChanged.connect(watch);
    watch();
    return () => {
      content.activeCellChanged.disconnect(watch);
      outputs?.disconnect(bump);
    };
  }, [notebook]);
  const cell = erroredCell(notebook);
  if (cell === null || fix === null) {
    return null;
  }
  return (
    <button
      className="jp-mod-styled jp-ci-fix"
      data-jupyter-ci="fix"
      title="Ask jupyter-ci to fix the error of the active cell, in a new %%ask cell below it"
      onClick={fix}
    >
      Fix this cell's error
    </button>
  );
}

/** A code cell model as the Fix button reads it: its outputs' change signal. */
interface IHasOutputs {
  outputs: { changed: ISignal<unknown, unknown> } | null;
}
