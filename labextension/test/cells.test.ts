/**
 * The record rule: the generated-cell rule, from the same table as
 * tests/test_record_rule.py, and what a generated cell's record holds.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';

import type { INotebookModel } from '@jupyterlab/notebook';

import {
  asGeneratedRecord,
  askIdOf,
  asksAbove,
  attemptOf,
  codeAbove,
  generatedIds,
  generatedRecordJSON,
  ICellData,
  isAskSource,
  MAX_ABOVE_CHARS,
  newGeneratedRecord,
  withPin
} from '../src/cells';
import { generatedAfter } from '../src/notebookcells';
import type { IStepEnd } from '../src/protocol';

interface ICase {
  name: string;
  about: string;
  cells: ICellData[];
  index: number;
  expected: string[];
}

// lib-test/test/ -> the repository's tests/ folder.
const TABLE = join(__dirname, '..', '..', '..', 'tests', 'record_cases.json');
const CASES = JSON.parse(readFileSync(TABLE, 'utf-8')) as ICase[];

/** Just enough of a notebook model for `generatedAfter` (cells by position). */
function fakeModel(cells: ICellData[]): INotebookModel {
  const models = cells.map(cell => ({
    id: cell.id,
    getMetadata: (key: string) => cell.metadata?.[key]
  }));
  return {
    cells: { length: models.length, get: (i: number) => models[i] }
  } as unknown as INotebookModel;
}

describe('record_cases.json', () => {
  test('holds the cases both sides check', () => {
    const names = CASES.map(c => c.name);
    assert.ok(names.length >= 10);
    assert.equal(new Set(names).size, names.length);
    for (const name of ['pasted_copy_ignored', 'missing_step', 'duplicated_step']) {
      assert.ok(names.includes(name), name);
    }
  });
});

describe('generatedIds', () => {
  for (const c of CASES) {
    test(c.name, () => {
      assert.deepEqual(generatedIds(c.cells, c.index), c.expected, c.about);
    });
  }

  test('an index outside the notebook has none', () => {
    const cells = CASES[0].cells;
    assert.deepEqual(generatedIds(cells, -1), []);
    assert.deepEqual(generatedIds(cells, cells.length), []);
  });
});

describe('generatedAfter', () => {
  for (const c of CASES) {
    test(`${c.name} (by cell id, in a notebook model)`, () => {
      const model = fakeModel(c.cells);
      assert.deepEqual(generatedAfter(model, c.cells[c.index].id), c.expected, c.about);
    });
  }

  test('an unknown cell id has none', () => {
    const c = CASES.find(c => c.expected.length > 0);
    assert.ok(c !== undefined);
    assert.deepEqual(generatedAfter(fakeModel(c.cells), 'not-a-cell'), []);
  });
});

describe('codeAbove', () => {
  const cells = [
    { cellType: 'markdown', source: '# Title' },
    { cellType: 'code', source: 'import pandas as pd' },
    { cellType: 'code', source: '%%ask\nload the orders' },
    { cellType: 'code', source: 'orders = pd.read_csv("o.csv")' },
    { cellType: 'code', source: '%ask what now?' },
    { cellType: 'code', source: 'print(orders)' }
  ];

  test('sends the code cells above the ask, without ask cells or markdown', () => {
    assert.deepEqual(codeAbove(cells, 4), ['import pandas as pd', 'orders = pd.read_csv("o.csv")']);
    assert.deepEqual(codeAbove(cells, 0), []);
  });

  test('sends nothing when the code above is too long to send with a request', () => {
    const big = [{ cellType: 'code', source: 'x'.repeat(MAX_ABOVE_CHARS + 1) }];
    assert.equal(codeAbove(big, 1), null);
  });

  test('tells ask cells by their first word', () => {
    assert.ok(isAskSource('%%ask -m openai:x\nplot'));
    assert.ok(isAskSource('  %ask why?'));
    assert.ok(!isAskSource('%%asker\nx'));
    assert.ok(!isAskSource('# %%ask in a comment'));
  });
});

describe('asksAbove', () => {
  const gen = (askId: string, step: number) => ({ jupyter_ci: { ask_id: askId, step } });
  const cells = [
    { id: 'c0', cellType: 'code', source: 'import pandas as pd' },
    { id: 'a1', cellType: 'code', source: '%%ask\nload', metadata: { jupyter_ci: { ask_id: 'k1' } } },
    { id: 'g1', cellType: 'code', source: 'orders = 1', metadata: gen('k1', 1) },
    { id: 'm0', cellType: 'markdown', source: 'notes' },
    { id: 'g2', cellType: 'code', source: 'total = orders', metadata: gen('k1', 2) },
    { id: 'a2', cellType: 'code', source: '%ask plot it' },
    { id: 'a3', cellType: 'code', source: '%%ask\nnow what?' }
  ];

  test('names each ask above, its record and where its cells are in `above`', () => {
    assert.deepEqual(codeAbove(cells, 6), ['import pandas as pd', 'orders = 1', 'total = orders']);
    assert.deepEqual(asksAbove(cells, 6), [
      { cell_id: 'a1', ask_id: 'k1', cells: [1, 2] },
      { cell_id: 'a2', ask_id: null, cells: [] }
    ]);
  });

  test('has none above the first cell, and leaves out the asks below', () => {
    assert.deepEqual(asksAbove(cells, 0), []);
    assert.deepEqual(asksAbove(cells, 2), [{ cell_id: 'a1', ask_id: 'k1', cells: [] }]);
  });
});

describe('withPin', () => {
  test('goes right after the magic, keeping options and the prompt', () => {
    assert.equal(withPin('%%ask\nplot it', 'ab12'), '%%ask --pin ab12\nplot it');
    assert.equal(
      withPin('%%ask -m openai:x --timeout 5\nplot', 'ab12'),
      '%%ask --pin ab12 -m openai:x --timeout 5\nplot'
    );
    assert.equal(withPin('%ask Which month, and by how much?', 'ab12'),
      '%ask --pin ab12 Which month, and by how much?');
  });

  test('replaces an older pin and leaves other cells and bad pins alone', () => {
    assert.equal(withPin('%%ask --pin 0000 -m x\nplot', 'ab12'), '%%ask --pin ab12 -m x\nplot');
    assert.equal(withPin('print(1)', 'ab12'), 'print(1)');
    assert.equal(withPin('%%ask\nplot', 'ab12\nimport os'), '%%ask\nplot');
  });
});

describe('asGeneratedRecord', () => {
  test('fills what an older or hand-edited record lacks', () => {
    assert.deepEqual(asGeneratedRecord({ ask_id: 'a1', step: 2 }), {
      ask_id: 'a1',
      step: 2,
      model: '',
      attempts: [],
      interrupted: undefined
    });
  });

  test('keeps the fields it knows and the interrupted flag only when true', () => {
    const attempts = [
      { attempt: 1, status: 'ok', ename: null, evalue: null, duration_s: 0.5, code: 'x = 1' }
    ];
    const full = { ask_id: 'a1', step: 1, model: 'openai:m', attempts, interrupted: true };
    assert.deepEqual(asGeneratedRecord({ ...full, extra: 'dropped' }), full);
    assert.equal(asGeneratedRecord({ ...full, interrupted: 'yes' })?.interrupted, undefined);
    assert.deepEqual(asGeneratedRecord({ ...full, model: 3, attempts: 'none' })?.attempts, []);
  });

  test('is null for an ask record and for non-records', () => {
    for (const value of [
      { ask_id: 'a1', status: 'done' },
      { step: 1 },
      { ask_id: 1, step: 1 },
      { ask_id: 'a1', step: '1' },
      'a1',
      null
    ]) {
      assert.equal(asGeneratedRecord(value), null, JSON.stringify(value));
    }
  });
});

describe('askIdOf', () => {
  test('reads the ask id of ask and generated records alike', () => {
    assert.equal(askIdOf({ ask_id: 'a1', status: 'done' }), 'a1');
    assert.equal(askIdOf({ ask_id: 'a2', step: 3 }), 'a2');
  });

  test('is null without a string ask id', () => {
    for (const value of [{}, { ask_id: 5 }, null, 'a1', undefined]) {
      assert.equal(askIdOf(value), null, JSON.stringify(value));
    }
  });
});

describe('writing a generated record', () => {
  const stepEnd = (durationMs: number, error: IStepEnd['error'] = null): IStepEnd => ({
    type: 'step_end',
    ask_id: 'a1',
    protocol: 2,
    step: 1,
    attempt: 2,
    status: error === null ? 'ok' : 'error',
    execution_count: 7,
    duration_ms: durationMs,
    error
  });

  test('an attempt keeps its duration in seconds, the stored format', () => {
    assert.deepEqual(attemptOf(stepEnd(1234.4), 'x = 1'), {
      attempt: 2,
      status: 'ok',
      ename: null,
      evalue: null,
      duration_s: 1.234,
      code: 'x = 1'
    });
    const failed = attemptOf(stepEnd(250, { ename: 'NameError', evalue: 'y' }), 'y');
    assert.deepEqual([failed.status, failed.ename, failed.evalue, failed.duration_s], [
      'error',
      'NameError',
      'y',
      0.25
    ]);
  });

  test('reads back as written, interrupted only when set', () => {
    const record = newGeneratedRecord('a1', 3, 'openai:m');
    record.attempts.push(attemptOf(stepEnd(500), 'z'));
    const written = generatedRecordJSON(record);
    assert.equal('interrupted' in written, false);
    assert.deepEqual(asGeneratedRecord(JSON.parse(JSON.stringify(written))), {
      ...record,
      interrupted: undefined
    });
    record.interrupted = true;
    assert.equal(generatedRecordJSON(record).interrupted, true);
  });
});
