/**
 * Which page writes an ask's cells when several pages share one notebook.
 *
 * Under Jupyter's real-time collaboration (jupyter-collaboration) every page of a notebook
 * holds the same shared document, and every page on the notebook's kernel receives the ask's
 * messages: were each page to turn them into cells, each step would be inserted once per page
 * and its source typed by all of them at once. So exactly one page writes an ask's cells; the
 * others follow the ask in their side panel and see its cells come through the document.
 *
 * The pages tell each other who they are through the document's awareness (Yjs: every page
 * sees every other's state): the kernel and kernel connection each holds, and the asks each
 * writes. An ask's writer is, in this order: the page that says it writes it (the lowest client
 * id, should two say so at once); the page whose kernel connection sent the ask's
 * execute_request (`parent_header.session` of the ask's comm: the page that ran the `%%ask`
 * cell); else, once the ask went unclaimed for GRACE_MS, the page with the lowest client id on
 * the kernel. So when the writer goes away (reloaded or closed: its state leaves the awareness
 * at once as the page hides, else when it times out), one other page takes over and rebuilds
 * the cells from the kernel's account (notebookasks.ts). Without collaboration each page holds
 * a model of its own, and writes every ask's cells into it.
 */
import type { IDisposable } from '@lumino/disposable';
import { ISignal, Signal } from '@lumino/signaling';

/** The field of a page's awareness state that says what it holds and writes. */
export const PRESENCE_FIELD = 'jupyter_ci';
/**
 * How long an ask goes unclaimed, and a page present, before the page may take it over: time
 * for the other pages' states to reach it (each page repeats its own when another joins).
 */
export const GRACE_MS = 2000;

/** What a page publishes of itself in the notebook's awareness. */
export interface IPresence {
  /** The notebook's kernel, as this page holds it. */
  kernel: string;
  /** The client id of its kernel connection (the `session` of the requests it sends). */
  client: string;
  /** The asks whose cells it writes. */
  writes: string[];
}

/** An awareness change: the client ids added, updated and removed. */
export interface IAwarenessChange {
  added: number[];
  updated: number[];
  removed: number[];
}

/** A shared document's awareness, as far as it is used here (y-protocols' Awareness). */
export interface IAwarenessLike {
  readonly clientID: number;
  getStates(): Map<number, Record<string, unknown>>;
  getLocalState(): Record<string, unknown> | null;
  setLocalState(state: Record<string, unknown> | null): void;
  setLocalStateField(field: string, value: unknown): void;
  on(name: 'change', handler: (change: IAwarenessChange, origin: unknown) => void): void;
  off(name: 'change', handler: (change: IAwarenessChange, origin: unknown) => void): void;
}

/** The kernel connection a page holds: the kernel's id and the connection's client id. */
export interface IHeldKernel {
  id: string;
  clientId: string;
}

/** The awareness of a notebook model that pages share, or null when it is this page's alone. */
export function sharedAwareness(model: {
  readonly collaborative?: boolean;
  readonly sharedModel: unknown;
}): IAwarenessLike | null {
  const awareness = (model.sharedModel as { awareness?: IAwarenessLike } | null)?.awareness;
  return model.collaborative === true && awareness ? awareness : null;
}

/** Read a page's presence from its awareness state (null: none, or not one of ours). */
export function readPresence(state: unknown): IPresence | null {
  const value = (state as Record<string, unknown> | null | undefined)?.[PRESENCE_FIELD];
  if (typeof value !== 'object' || value === null) {
    return null;
  }
  const { kernel, client, writes } = value as Record<string, unknown>;
  if (typeof kernel !== 'string' || typeof client !== 'string' || !Array.isArray(writes)) {
    return null;
  }
  return { kernel, client, writes: writes.filter((w): w is string => typeof w === 'string') };
}

/**
 * Return the client id of the page that writes this ask, or null while no page may yet:
 * the one that says it does, else the one that sent it, else (once `unclaimedLongEnough`)
 * the lowest id.
 */
export function electWriter(
  peers: ReadonlyMap<number, IPresence>,
  askId: string,
  origin: string | null,
  unclaimedLongEnough: boolean
): number | null {
  const lowest = (keep: (p: IPresence) => boolean): number | null => {
    const ids = [...peers].filter(([, p]) => keep(p)).map(([id]) => id);
    return ids.length === 0 ? null : Math.min(...ids);
  };
  return (
    lowest(p => p.writes.includes(askId)) ??
    (origin === null ? null : lowest(p => p.client === origin)) ??
    (unclaimedLongEnough ? lowest(() => true) : null)
  );
}

/** An ask this page follows: who sent it, since when, and whether this page writes it. */
interface IFollowed {
  origin: string | null;
  since: number;
  writes: boolean;
}

/** Where pages go away (`pagehide`): a window, or nothing outside a browser. */
type PageEvents = Pick<Window, 'addEventListener' | 'removeEventListener'> | null;

/**
 * This page's side of the election for one shared notebook: its presence in the awareness,
 * and for each ask it follows, whether it writes it now.
 */
export class AskWriters implements IDisposable {
  /** `awareness`: the shared document's; null when the notebook is not shared (no RTC). */
  constructor(
    private readonly _awareness: IAwarenessLike | null,
    private readonly _now: () => number = Date.now,
    private readonly _page: PageEvents = typeof window === 'undefined' ? null : window
  ) {
    _awareness?.on('change', this._onChange);
    this._page?.addEventListener('pagehide', this._onHide);
    this._page?.addEventListener('pageshow', this._onShow);
  }

  /** Emits an ask's id when this page starts writing an ask it only followed until now. */
  get tookOver(): ISignal<this, string> {
    return this._tookOver;
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  /** Say which kernel connection this page holds now (null: none). */
  present(kernel: IHeldKernel | null): void {
    if (kernel !== null && (this._held === null || this._held.id !== kernel.id)) {
      this._presentSince = this._now();
    }
    this._held = kernel;
    this._publish();
    this._decide();
  }

  /** Follow an ask its comm announced (`origin`: the session that sent it); say if this page writes it. */
  follow(askId: string, origin: string | null): boolean {
    if (this._awareness === null) {
      return true;
    }
    if (!this._asks.has(askId)) {
      this._asks.set(askId, { origin, since: this._now(), writes: false });
      this._decide(false);
      this._wakeAfterGrace();
    }
    return this.writes(askId);
  }

  /** Tell whether this page writes the cells of an ask it follows. */
  writes(askId: string): boolean {
    return this._awareness === null || this._asks.get(askId)?.writes === true;
  }

  /**
   * Tell whether this page writes the end of an ask: its writer, or, when no page writes it
   * (the writer went away, and the ask ends before the grace is over), the one elected now.
   */
  writesEnd(askId: string): boolean {
    const ask = this._asks.get(askId);
    if (this._awareness === null || ask?.writes === true) {
      return true;
    }
    const self = this._awareness.clientID;
    return (
      ask !== undefined && !this._hidden && electWriter(this._peers(), askId, ask.origin, true) === self
    );
  }

  /** Tell whether this page acts on a one-shot message (a reuse, an MCP client's cell). */
  writesNow(origin: string | null): boolean {
    if (this._awareness === null) {
      return true;
    }
    return !this._hidden && electWriter(this._peers(), '', origin, true) === this._awareness.clientID;
  }

  /** The ask is over: stop following it. */
  forget(askId: string): void {
    if (this._asks.delete(askId)) {
      this._publish();
    }
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this._asks.clear();
    if (this._timer !== null) {
      clearTimeout(this._timer);
    }
    this._page?.removeEventListener('pagehide', this._onHide);
    this._page?.removeEventListener('pageshow', this._onShow);
    this._awareness?.off('change', this._onChange);
    this._awareness?.setLocalStateField(PRESENCE_FIELD, null);
    Signal.clearData(this);
  }

  /** The pages on this page's kernel, this one included, by client id. */
  private _peers(): Map<number, IPresence> {
    const peers = new Map<number, IPresence>();
    for (const [id, state] of this._awareness?.getStates() ?? []) {
      const presence = readPresence(state);
      if (presence !== null && presence.kernel === this._held?.id) {
        peers.set(id, presence);
      }
    }
    return peers;
  }

  /** Elect each followed ask's writer again; claim what this page now writes. */
  private _decide(announce = true): void {
    const self = this._awareness?.clientID;
    if (self === undefined || this._isDisposed || this._hidden) {
      return;
    }
    const peers = this._peers();
    const now = this._now();
    const taken: string[] = [];
    for (const [askId, ask] of this._asks) {
      const waited = now - Math.max(ask.since, this._presentSince) >= GRACE_MS;
      const writes = peers.has(self) && electWriter(peers, askId, ask.origin, waited) === self;
      if (writes && !ask.writes && announce) {
        taken.push(askId);
      }
      ask.writes = writes;
    }
    this._publish();
    for (const askId of taken) {
      this._tookOver.emit(askId);
    }
  }

  /** Publish what this page holds and writes (only when it changed). */
  private _publish(): void {
    const awareness = this._awareness;
    if (awareness === null || this._isDisposed || this._hidden) {
      return;
    }
    const writes = [...this._asks].filter(([, a]) => a.writes).map(([id]) => id);
    const held = this._held;
    const presence = held === null ? null : { kernel: held.id, client: held.clientId, writes };
    const key = JSON.stringify(presence);
    if (key !== this._published) {
      this._published = key;
      awareness.setLocalStateField(PRESENCE_FIELD, presence);
    }
  }

  /** Decide again once the youngest unclaimed ask has waited long enough. */
  private _wakeAfterGrace(): void {
    if (this._timer !== null) {
      clearTimeout(this._timer);
    }
    this._timer = setTimeout(() => {
      this._timer = null;
      this._decide();
    }, GRACE_MS + 50);
  }

  private readonly _onChange = (change: IAwarenessChange): void => {
    const self = this._awareness?.clientID;
    if (this._held !== null && change.added.some(id => id !== self)) {
      // A page joined: it has not seen this one's state yet (the server keeps none for it).
      const state = this._awareness?.getLocalState();
      if (state) {
        this._awareness?.setLocalState(state);
      }
    }
    this._decide();
  };

  /**
   * The page goes away (reload, close): the others may take over its asks now, and this page
   * writes no more (what it would write as it unloads is the others' now).
   */
  private readonly _onHide = (): void => {
    this._hidden = true;
    for (const ask of this._asks.values()) {
      ask.writes = false;
    }
    this._published = null;
    this._awareness?.setLocalStateField(PRESENCE_FIELD, null);
  };

  /** The page came back from the browser's cache: it is one of the pages again. */
  private readonly _onShow = (event: Event): void => {
    if ((event as PageTransitionEvent).persisted && this._hidden) {
      this._hidden = false;
      this._presentSince = this._now();
      this._publish();
      this._decide();
    }
  };

  private readonly _asks = new Map<string, IFollowed>();
  private readonly _tookOver = new Signal<this, string>(this);
  private _held: IHeldKernel | null = null;
  private _presentSince = 0;
  private _published: string | null = null;
  private _timer: ReturnType<typeof setTimeout> | null = null;
  private _hidden = false;
  private _isDisposed = false;
}
