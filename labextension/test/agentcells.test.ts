/**
 * Cells an agent wrote or ran, as they come into a shared notebook from the server
 * (agentcells.ts): their marks, their badge, and that the page takes their trust and marks
 * the kernel before the change reaches the cell.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { YNotebook } from '@jupyter/ydoc';
import type { ICellModel } from '@jupyterlab/cells';
import type { INotebookModel } from '@jupyterlab/notebook';
import { Signal } from '@lumino/signaling';

import { AgentCells, agentMarkOf, isAgentCell } from '../src/agentcells';
import { agentBadge } from '../src/decoration';
import type { KernelMarks } from '../src/outputtrust';
import type { TrustGuard } from '../src/trust';

// The Yjs instance @jupyter/ydoc's documents are made with (its ES module).
// eslint-disable-next-line @typescript-eslint/no-require-imports
const Y = require(require.resolve('yjs').replace(/yjs\.cjs$/, 'yjs.mjs')) as typeof import('yjs');

describe('agent marks', () => {
  test('who wrote a cell and who ran it', () => {
    assert.deepEqual(agentMarkOf({ external: 'mcp' }), { external: 'mcp', ranBy: null });
    assert.deepEqual(agentMarkOf({ ran_by: 'mcp', ask_id: 'a' }), { external: null, ranBy: 'mcp' });
    assert.deepEqual(agentMarkOf(null), { external: null, ranBy: null });
    assert.deepEqual(agentMarkOf({ external: 3 }), { external: null, ranBy: null });
  });

  test('the badge says it', () => {
    assert.equal(agentBadge({ external: 'mcp', ran_by: 'mcp' }), 'from an MCP client');
    assert.equal(agentBadge({ ran_by: 'mcp' }), 'run by an MCP client');
    assert.equal(agentBadge({ ran_by: 'cursor' }), 'run by an cursor client');
    assert.equal(agentBadge({}), null);
  });
});

/** A page's cell model over a shared cell, as far as AgentCells and its guard read it. */
function cellModel(shared: YNotebook['cells'][number]): ICellModel {
  return {
    sharedModel: shared,
    type: shared.cell_type,
    trusted: true,
    getMetadata: (key: string) => shared.getMetadata(key)
  } as unknown as ICellModel;
}

/** A page of a notebook shared with a server, and what its guard and marks were told. */
function sharedPage() {
  const server = YNotebook.create({
    data: {
      cells: [{ cell_type: 'code', source: 'mine = 1', metadata: {}, outputs: [], execution_count: null }]
    } as unknown as NonNullable<Parameters<typeof YNotebook.create>[0]>['data']
  });
  const page = new YNotebook();
  const told: string[] = [];
  const models = new Map<unknown, ICellModel>();
  const changed = new Signal<unknown, { type: string; newValues: ICellModel[] }>({});
  const model = {
    sharedModel: page,
    cells: {
      get length() {
        return page.cells.length;
      },
      get: (i: number) => models.get(page.cells[i]),
      changed
    }
  };
  page.changed.connect((_, change) => {
    // As the notebook model does: a model for each new cell, then its list's signal.
    if (change.cellsChange) {
      const added = page.cells.filter(c => !models.has(c)).map(c => {
        models.set(c, cellModel(c));
        return models.get(c) as ICellModel;
      });
      if (added.length > 0) {
        changed.emit({ type: 'add', newValues: added });
      }
    }
  });
  const guard = {
    place: (cell: ICellModel) => told.push(`place ${cell.sharedModel.getSource()}`),
    scheduled: (cell: ICellModel) => told.push(`scheduled ${cell.sharedModel.getSource()}`)
  } as unknown as TrustGuard;
  let state = 'clean';
  const marks = {
    mark: (id: string) => {
      state = 'model_code';
      told.push(`mark ${id}`);
    },
    state: () => state
  } as unknown as KernelMarks;
  server.ydoc.on('update', (update: Uint8Array, origin: unknown) => {
    if (origin !== 'page') {
      Y.applyUpdate(page.ydoc, update, 'server');
    }
  });
  Y.applyUpdate(page.ydoc, Y.encodeStateAsUpdate(server.ydoc), 'server'); // the load
  const agents = new AgentCells({
    model: model as unknown as INotebookModel,
    guard,
    marks,
    kernelId: () => 'k1',
    loaded: Promise.resolve()
  });
  const dispose = (): void => {
    agents.dispose();
    page.dispose();
    server.dispose();
  };
  return { server, page, told, dispose };
}

const settle = (): Promise<void> => new Promise(resolve => setTimeout(resolve, 0));

describe('AgentCells', () => {
  test("an agent's cell from the server is untrusted and its kernel marked", async () => {
    const { server, told, dispose } = sharedPage();
    await settle();
    assert.deepEqual(told, [], 'the cells the notebook loaded with are not news');
    server.insertCell(1, {
      cell_type: 'code',
      source: 'plant()',
      metadata: { jupyter_ci: { external: 'mcp' } }
    });
    assert.deepEqual(told, ['place plant()', 'mark k1']);
    assert.equal(isAgentCell(cellModel(server.cells[1])), true);
    dispose();
  });

  test("the user's own cell an agent runs: untrusted before its outputs reach it", async () => {
    const { server, page, told, dispose } = sharedPage();
    await settle();
    const seenAt: number[] = [];
    page.cells[0].changed.connect((_, change) => {
      if (change.outputsChange) {
        seenAt.push(told.length); // what the guard had been told when the cell saw outputs
      }
    });
    server.transact(() => {
      server.cells[0].setMetadata('jupyter_ci', { ran_by: 'mcp' });
      (server.cells[0] as unknown as { setOutputs(o: unknown[]): void }).setOutputs([
        { output_type: 'stream', name: 'stdout', text: 'hooked' }
      ]);
    });
    assert.deepEqual(told, ['place mine = 1', 'mark k1']);
    assert.deepEqual(seenAt, [2]);
    dispose();
  });

  test('outputs another page writes while the kernel ran model code lose their trust', async () => {
    const { server, told, dispose } = sharedPage();
    await settle();
    server.insertCell(1, { cell_type: 'code', source: 'x', metadata: { jupyter_ci: { ran_by: 'mcp' } } });
    told.length = 0;
    (server.cells[0] as unknown as { setOutputs(o: unknown[]): void }).setOutputs([
      { output_type: 'stream', name: 'stdout', text: 'later' }
    ]);
    server.cells[0].setSource('edited'); // not an output: nothing to do
    assert.deepEqual(told, ['scheduled mine = 1']);
    dispose();
  });
});
