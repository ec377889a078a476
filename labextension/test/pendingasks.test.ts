/**
 * An ask sent from the panel is pending in its notebook's conversation until it starts.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import type { NotebookPanel } from '@jupyterlab/notebook';

import type { IAskInserted } from '../src/commands';
import { Conversations } from '../src/conversationstore';
import { NOT_STARTED, PendingAsks } from '../src/pendingasks';

/** A notebook panel as PendingAsks sees it: its document. */
function panel(path: string): NotebookPanel {
  return { context: { path } } as unknown as NotebookPanel;
}

describe('PendingAsks', () => {
  test('inserts the %%ask source and shows the prompt pending, failed when it never starts', async () => {
    const conversations = new Conversations();
    const sources: string[] = [];
    let ran: () => void = () => undefined;
    const insert = (_: NotebookPanel, source: string): IAskInserted => {
      sources.push(source);
      return { cellId: 'c1', done: new Promise<boolean>(resolve => (ran = () => resolve(true))) };
    };
    const notebook = panel('n.ipynb');
    const inserted = new PendingAsks(conversations, insert).ask(notebook, '  plot it ', 'openai:m');
    assert.equal(inserted?.cellId, 'c1');
    assert.deepEqual(sources, ['%%ask -m openai:m\nplot it']);
    const conversation = conversations.get(notebook.context);
    assert.deepEqual(conversation.asks.map(a => [a.cellId, a.prompt, a.model, a.status]), [
      ['c1', 'plot it', 'openai:m', 'pending']
    ]);
    ran();
    await inserted?.done;
    await new Promise(resolve => setImmediate(resolve));
    assert.deepEqual([conversation.asks[0].status, conversation.asks[0].error], ['failed', NOT_STARTED]);
  });

  test('nothing is pending when no cell could be inserted', () => {
    const conversations = new Conversations();
    const notebook = panel('n.ipynb');
    assert.equal(new PendingAsks(conversations, () => null).ask(notebook, 'plot', null), null);
    assert.equal(conversations.get(notebook.context).asks.length, 0);
  });
});
