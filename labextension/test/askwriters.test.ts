/**
 * Which page writes an ask's cells when pages share a notebook (askwriters.ts): the election,
 * and pages that come, claim, and go through a shared awareness.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, mock, test } from 'node:test';

import {
  AskWriters,
  electWriter,
  GRACE_MS,
  IAwarenessChange,
  IAwarenessLike,
  IPresence,
  PRESENCE_FIELD,
  readPresence,
  sharedAwareness
} from '../src/askwriters';

type Handler = (change: IAwarenessChange, origin: unknown) => void;

/** The awareness states of one document, as the pages on it see them (at once). */
class Room {
  readonly states = new Map<number, Record<string, unknown>>();
  readonly pages = new Set<FakeAwareness>();
  /** How many times each page sent its state. */
  readonly sent = new Map<number, number>();
}

/** One page's awareness in a Room. */
class FakeAwareness implements IAwarenessLike {
  constructor(readonly room: Room, readonly clientID: number) {
    room.pages.add(this);
    this.setLocalState({ user: { name: `page ${clientID}` } });
  }
  getStates(): Map<number, Record<string, unknown>> {
    return this.room.states;
  }
  getLocalState(): Record<string, unknown> | null {
    return this.room.states.get(this.clientID) ?? null;
  }
  setLocalState(state: Record<string, unknown> | null): void {
    const had = this.room.states.has(this.clientID);
    this.room.sent.set(this.clientID, (this.room.sent.get(this.clientID) ?? 0) + 1);
    if (state === null) {
      this.room.states.delete(this.clientID);
    } else {
      this.room.states.set(this.clientID, state);
    }
    const change: IAwarenessChange = {
      added: had || state === null ? [] : [this.clientID],
      updated: had && state !== null ? [this.clientID] : [],
      removed: had && state === null ? [this.clientID] : []
    };
    for (const page of this.room.pages) {
      page.handlers.forEach(h => h(change, page === this ? 'local' : 'remote'));
    }
  }
  setLocalStateField(field: string, value: unknown): void {
    this.setLocalState({ ...(this.getLocalState() ?? {}), [field]: value });
  }
  on(_: 'change', handler: Handler): void {
    this.handlers.push(handler);
  }
  off(_: 'change', handler: Handler): void {
    this.handlers = this.handlers.filter(h => h !== handler);
  }
  handlers: Handler[] = [];
}

/** A page of the shared notebook, on kernel k1, whose kernel connection is `client`. */
function page(room: Room, clientID: number, client: string): AskWriters {
  const writers = new AskWriters(new FakeAwareness(room, clientID), Date.now, null);
  writers.present({ id: 'k1', clientId: client });
  return writers;
}

function presence(client: string, writes: string[] = []): IPresence {
  return { kernel: 'k1', client, writes };
}

describe('electWriter', () => {
  const peers = new Map([
    [7, presence('session-a')],
    [3, presence('session-b')],
    [9, presence('session-c', ['ask-1'])]
  ]);

  test('the page that says it writes the ask writes it', () => {
    assert.equal(electWriter(peers, 'ask-1', 'session-a', false), 9);
  });

  test("else the page whose kernel connection sent the ask's request", () => {
    assert.equal(electWriter(peers, 'ask-2', 'session-a', false), 7);
  });

  test('else, once the ask went unclaimed long enough, the lowest client id', () => {
    assert.equal(electWriter(peers, 'ask-2', 'session-gone', false), null);
    assert.equal(electWriter(peers, 'ask-2', 'session-gone', true), 3);
    assert.equal(electWriter(peers, 'ask-2', null, true), 3);
  });

  test('two pages that both say so: the lowest id writes, the other yields', () => {
    const both = new Map([...peers, [5, presence('session-d', ['ask-1'])]]);
    assert.equal(electWriter(both, 'ask-1', 'session-a', true), 5);
  });
});

describe('readPresence and sharedAwareness', () => {
  test("reads a page's presence, and nothing else", () => {
    const state = { [PRESENCE_FIELD]: { kernel: 'k', client: 'c', writes: ['a', 3] } };
    assert.deepEqual(readPresence(state), { kernel: 'k', client: 'c', writes: ['a'] });
    assert.equal(readPresence({ user: { name: 'x' } }), null);
    assert.equal(readPresence({ [PRESENCE_FIELD]: null }), null);
    assert.equal(readPresence({ [PRESENCE_FIELD]: { kernel: 1, client: 'c', writes: [] } }), null);
  });

  test('a model that is not shared has no awareness to elect with', () => {
    const awareness = new FakeAwareness(new Room(), 1);
    assert.equal(sharedAwareness({ collaborative: false, sharedModel: { awareness } }), null);
    assert.equal(sharedAwareness({ sharedModel: { awareness } }), null);
    assert.equal(sharedAwareness({ collaborative: true, sharedModel: { awareness } }), awareness);
  });
});

describe('AskWriters', () => {
  beforeEach(() => mock.timers.enable({ apis: ['setTimeout', 'Date'] }));
  afterEach(() => mock.timers.reset());

  test('without a shared document, this page writes every ask', () => {
    const alone = new AskWriters(null, Date.now, null);
    assert.equal(alone.follow('ask-1', 'someone else'), true);
    assert.equal(alone.writes('ask-2'), true);
    assert.equal(alone.writesNow(null), true);
  });

  test('the page that sent the ask writes it; the other follows; both say so', () => {
    const room = new Room();
    const a = page(room, 20, 'session-a');
    const b = page(room, 10, 'session-b');
    assert.equal(a.follow('ask-1', 'session-a'), true);
    assert.equal(b.follow('ask-1', 'session-a'), false);
    mock.timers.tick(GRACE_MS * 3);
    assert.equal(b.writes('ask-1'), false, 'the lower id does not take over a claimed ask');
    assert.deepEqual(readPresence(room.states.get(20))?.writes, ['ask-1']);
    assert.deepEqual(readPresence(room.states.get(10))?.writes, []);
  });

  test('when the writer goes away, exactly one other page takes over', () => {
    const room = new Room();
    const a = page(room, 5, 'session-a');
    const b = page(room, 30, 'session-b');
    const c = page(room, 20, 'session-c');
    a.follow('ask-1', 'session-a');
    const took: string[] = [];
    b.tookOver.connect((_, id) => took.push(`b ${id}`));
    c.tookOver.connect((_, id) => took.push(`c ${id}`));
    b.follow('ask-1', 'session-a');
    c.follow('ask-1', 'session-a');
    mock.timers.tick(GRACE_MS * 2);
    assert.deepEqual(took, []);
    a.dispose(); // as when the page hides: its presence goes at once
    assert.deepEqual(took, ['c ask-1'], 'the lowest id of the others, at once');
    room.pages.forEach(p => p.setLocalState(p.getLocalState())); // more awareness traffic
    assert.deepEqual(took, ['c ask-1']);
    assert.equal(c.writes('ask-1'), true);
    assert.equal(b.writes('ask-1'), false);
  });

  test('a page that opens mid-ask waits before it writes, then writes when alone', () => {
    const room = new Room();
    const reloaded = page(room, 40, 'session-new');
    const took: string[] = [];
    reloaded.tookOver.connect((_, id) => took.push(id));
    assert.equal(reloaded.follow('ask-1', 'session-of-the-page-before'), false);
    mock.timers.tick(GRACE_MS + 100);
    assert.deepEqual(took, ['ask-1']);
    assert.equal(reloaded.writes('ask-1'), true);
  });

  test('a page that joins makes the others repeat their state for it', () => {
    const room = new Room();
    page(room, 1, 'session-a');
    const before = room.sent.get(1) ?? 0;
    page(room, 2, 'session-b');
    assert.ok((room.sent.get(1) ?? 0) > before);
  });

  test('a page on another kernel is not a candidate', () => {
    const room = new Room();
    const a = new AskWriters(new FakeAwareness(room, 1), Date.now, null);
    a.present({ id: 'k-other', clientId: 'session-a' });
    const b = page(room, 2, 'session-b');
    b.follow('ask-1', 'session-a');
    mock.timers.tick(GRACE_MS + 100);
    assert.equal(b.writes('ask-1'), true);
    assert.equal(a.writesNow(null), true, 'alone on its own kernel');
  });
});
