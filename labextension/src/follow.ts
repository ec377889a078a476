/**
 * The panel's conversation follows its newest ask, as a chat does: it stays at its end while
 * asks are sent and their events stream in, unless the user scrolled up on purpose; then it
 * stays where they are until they scroll back to the end or send another ask.
 */

/** How far from the end (px) still counts as at the end: rounding, a last line half shown. */
export const SLACK_PX = 24;

/** The scroll metrics of an element (an HTMLElement has them). */
export interface IScrollMetrics {
  scrollTop: number;
  scrollHeight: number;
  clientHeight: number;
}

/** Tell whether a scrolled element shows its end (within `slack` px). */
export function atEnd(node: IScrollMetrics, slack: number = SLACK_PX): boolean {
  return node.scrollHeight - node.clientHeight - node.scrollTop <= slack;
}

/** What the follower uses of its element: scroll metrics, and its scroll events. */
export interface IScrolled extends IScrollMetrics {
  addEventListener(type: 'scroll', listener: () => void, options?: AddEventListenerOptions): void;
  removeEventListener(type: 'scroll', listener: () => void): void;
}

/**
 * Keep a scrolled element at its end while the user has not scrolled away from it.
 *
 * Where content grows without the page's own render (Markdown rendered later, outputs,
 * the panel shown again), `watch` has it followed too.
 */
export class ScrollFollower {
  constructor(private readonly _node: IScrolled) {
    _node.addEventListener('scroll', this._onScroll, { passive: true });
  }

  /** Whether the element is kept at its end. */
  get following(): boolean {
    return this._following;
  }

  /** A new ask: show it, wherever the user had scrolled to. */
  newest(): void {
    this._following = true;
    this.follow();
  }

  /** Go to the end if following (after content changed). */
  follow(): void {
    if (this._following && !atEnd(this._node, 0)) {
      this._node.scrollTop = this._node.scrollHeight;
      this._lastTop = this._node.scrollTop;
    }
  }

  /** Follow changes of `node`'s content and size that no render announces. */
  watch(node: HTMLElement): void {
    if (typeof MutationObserver !== 'undefined') {
      const mutations = new MutationObserver(() => this.follow());
      mutations.observe(node, { childList: true, subtree: true, characterData: true });
      this._stops.push(() => mutations.disconnect());
    }
    if (typeof ResizeObserver !== 'undefined') {
      const sizes = new ResizeObserver(() => this.follow());
      sizes.observe(node);
      this._stops.push(() => sizes.disconnect());
    }
  }

  dispose(): void {
    this._node.removeEventListener('scroll', this._onScroll);
    this._stops.forEach(stop => stop());
    this._stops = [];
  }

  // Only a move up leaves the end: content that grew before `follow` ran (an image loaded)
  // leaves it too, with the view where it was, which is no wish of the user's.
  private readonly _onScroll = (): void => {
    const top = this._node.scrollTop;
    if (atEnd(this._node)) {
      this._following = true;
    } else if (top < this._lastTop) {
      this._following = false;
    }
    this._lastTop = top;
  };

  private _following = true;
  private _lastTop = 0;
  private _stops: (() => void)[] = [];
}
