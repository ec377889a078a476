/**
 * Where the side panel's conversations are kept between page loads (the browser's local
 * storage): one per notebook document, the last asks only.
 */
import type { IAskView } from './askview';
import { Conversation } from './conversation';

/** The most asks a notebook's conversation keeps across page loads. */
export const KEPT_ASKS = 50;

/**
 * The most asks whose "what the model was sent" is kept across page loads: it holds the
 * context of every ask, too much for the browser's storage for all of them.
 */
export const KEPT_SENT = 10;

/** Where a conversation is kept between page loads (the browser's local storage). */
export interface IConversationStore {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
}

function isAskView(value: unknown): value is IAskView {
  const ask = value as Partial<IAskView> | null;
  return (
    typeof ask === 'object' &&
    ask !== null &&
    typeof ask.cellId === 'string' &&
    typeof ask.prompt === 'string' &&
    typeof ask.answer === 'string' &&
    Array.isArray(ask.steps)
  );
}

/** The asks kept across page loads: the last ones, what was sent only for the last few. */
function kept(asks: readonly IAskView[]): IAskView[] {
  const last = asks.slice(-KEPT_ASKS);
  return last.map((ask, i) => (i < last.length - KEPT_SENT ? { ...ask, sent: undefined } : ask));
}

/**
 * The asks kept under `key` in `store`. Asks that were running when the page went are
 * shown as interrupted until the kernel says they still run (it does, to a reloaded page,
 * with ask_state).
 */
export function loadAsks(store: IConversationStore, key: string): IAskView[] {
  let stored: unknown = null;
  try {
    stored = JSON.parse(store.getItem(key) ?? 'null');
  } catch {
    return []; // not ours, or cut short: start afresh
  }
  if (!Array.isArray(stored)) {
    return [];
  }
  const asks = stored.filter(isAskView);
  for (const ask of asks) {
    if (ask.status === 'running' || ask.status === 'pending') {
      ask.status = 'interrupted';
      ask.error = 'The page was reloaded while this ask ran.';
    }
  }
  return asks;
}

/** Keep the last of `asks` under `key` in `store`. */
export function saveAsks(store: IConversationStore, key: string, asks: readonly IAskView[]): void {
  try {
    store.setItem(key, JSON.stringify(kept(asks)));
  } catch {
    // Storage full or refused: the panel goes on without keeping it.
  }
}

/**
 * One conversation per open notebook document (shared by all its views).
 */
export class Conversations {
  constructor(private readonly _store: IConversationStore | null = null) {}

  /** Return the conversation of a document, creating (or loading) it on first use. */
  get(document: { readonly path: string }): Conversation {
    let conversation = this._map.get(document);
    if (conversation === undefined) {
      conversation = this._stored(`jupyter-ci:conversation:${document.path}`);
      this._map.set(document, conversation);
    }
    return conversation;
  }

  /** A conversation kept under `key` (when there is a store): what the panel showed comes back after a reload. */
  private _stored(key: string): Conversation {
    const store = this._store;
    if (store === null) {
      return new Conversation();
    }
    const conversation = new Conversation(loadAsks(store, key));
    conversation.changed.connect(() => saveAsks(store, key, conversation.asks));
    return conversation;
  }

  private readonly _map = new WeakMap<object, Conversation>();
}
