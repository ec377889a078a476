/**
 * Where the `%load_ext jupyter_ci` cell goes, and when none is needed.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { belowLoadCell, ILoaderCell, loadCellIndex, loadsExtension } from '../src/loader';

const md = (source: string): ILoaderCell => ({ cellType: 'markdown', source });
const py = (source: string): ILoaderCell => ({ cellType: 'code', source });

describe('loadCellIndex', () => {
  test('goes above the first code cell, below a title', () => {
    assert.equal(loadCellIndex([md('# Report'), py('import pandas'), py('%%ask\nplot it')]), 1);
    assert.equal(loadCellIndex([py('%%ask\nplot it')]), 0);
    assert.equal(loadCellIndex([md('# Report'), py('%ask plot it')]), 1);
  });

  test('is not needed without an ask, or with the line at or above the first ask', () => {
    assert.equal(loadCellIndex([py('x = 1'), md('%%ask in a note')]), null);
    assert.equal(loadCellIndex([py('%load_ext jupyter_ci'), py('%%ask\nplot it')]), null);
    assert.equal(loadCellIndex([py('import os\n%reload_ext  jupyter_ci\n'), py('%%ask\nx')]), null);
  });

  test('is needed when the line comes only after an ask, or only in a prompt', () => {
    assert.equal(loadCellIndex([py('%%ask\nx'), py('%load_ext jupyter_ci')]), 0);
    assert.equal(loadCellIndex([py('%%ask\n%load_ext jupyter_ci')]), 0);
  });

  test('reads the line, not a mention of it', () => {
    assert.ok(loadsExtension('%load_ext jupyter_ci'));
    assert.ok(!loadsExtension('# %load_ext jupyter_ci'));
    assert.ok(!loadsExtension('%load_ext jupyter_ci_other'));
  });
});

describe('belowLoadCell', () => {
  const nb = [md('# Report'), py('%load_ext jupyter_ci'), py('x = 1')];
  test('an ask from the panel with the title active lands below the load line, not above', () => {
    assert.equal(belowLoadCell(nb, 1), 2);
    assert.equal(belowLoadCell(nb, 0), 2);
  });
  test('elsewhere it lands where it was asked', () => {
    assert.equal(belowLoadCell(nb, 2), 2);
    assert.equal(belowLoadCell(nb, 3), 3);
    assert.equal(belowLoadCell([md('# Report'), py('x = 1')], 1), 1);
  });
});
