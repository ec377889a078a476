/**
 * The side panel's conversations kept between page loads, one per notebook.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { Conversations, KEPT_SENT } from '../src/conversationstore';

import { askEnd, askStart, stepEnd, stepStart } from './messages';

/** An in-memory stand-in for the browser's local storage. */
function memoryStore(): { getItem(k: string): string | null; setItem(k: string, v: string): void; items: Map<string, string> } {
  const items = new Map<string, string>();
  return {
    items,
    getItem: (k: string) => items.get(k) ?? null,
    setItem: (k: string, v: string) => {
      items.set(k, v);
    }
  };
}

describe('Conversations', () => {
  test('one conversation per document, shared by its views', () => {
    const conversations = new Conversations();
    const doc = { path: 'a.ipynb' };
    assert.equal(conversations.get(doc), conversations.get(doc));
    assert.notEqual(conversations.get(doc), conversations.get({ path: 'a.ipynb' }));
  });

  test('a conversation comes back after a reload, a running ask as interrupted until resumed', () => {
    const store = memoryStore();
    const before = new Conversations(store).get({ path: 'dir/n.ipynb' });
    before.start(askStart('c1', 'a1', 'first'));
    before.end(askEnd('a1', 'done', 'One.'));
    before.start(askStart('c2', 'a2', 'second'));
    before.stepStart(stepStart('a2', 1, 1));
    assert.ok(store.items.has('jupyter-ci:conversation:dir/n.ipynb'));

    const after = new Conversations(store).get({ path: 'dir/n.ipynb' });
    assert.deepEqual(after.asks.map(a => [a.prompt, a.status, a.answer]), [
      ['first', 'done', 'One.'],
      ['second', 'interrupted', '']
    ]);
    assert.equal(after.asks[1].error, 'The page was reloaded while this ask ran.');
    // The kernel says the ask still runs: the same entry goes on, no duplicate.
    after.start(askStart('c2', 'a2', 'second'));
    after.stepEnd(stepEnd('a2', 1, 'ok'));
    assert.equal(after.asks.length, 2);
    assert.equal(after.asks[1].status, 'running');
    assert.equal(after.asks[1].steps[0].status, 'ok');
    // Another notebook has its own.
    assert.equal(new Conversations(store).get({ path: 'other.ipynb' }).asks.length, 0);
  });

  test('what the model was sent is kept across reloads for the last asks only', () => {
    const store = memoryStore();
    const before = new Conversations(store).get({ path: 'n.ipynb' });
    const total = KEPT_SENT + 2;
    for (let i = 0; i < total; i++) {
      before.start(askStart(`c${i}`, `a${i}`));
      before.requestSent({ type: 'request_sent', ask_id: `a${i}`, parts: [{ name: 'p', tokens: 1, text: 'x' }] });
      before.end(askEnd(`a${i}`, 'done', 'ok'));
    }
    assert.ok(before.asks.every(a => a.sent?.length === 1), 'this page keeps them all');
    const after = new Conversations(store).get({ path: 'n.ipynb' });
    assert.deepEqual(
      after.asks.map(a => a.sent !== undefined),
      [...Array(total)].map((_, i) => i >= total - KEPT_SENT)
    );
  });

  test('a damaged or foreign stored value is ignored, not fatal', () => {
    const store = memoryStore();
    store.setItem('jupyter-ci:conversation:n.ipynb', '{not json');
    assert.equal(new Conversations(store).get({ path: 'n.ipynb' }).asks.length, 0);
    store.setItem('jupyter-ci:conversation:n.ipynb', JSON.stringify([{ cellId: 1 }, 'x']));
    assert.equal(new Conversations(store).get({ path: 'n.ipynb' }).asks.length, 0);
  });
});
