/**
 * The conversation follows its newest ask like a chat: kept at the end while content grows,
 * left where the user scrolled up to, brought back by a new ask or a scroll to the end.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { atEnd, IScrolled, ScrollFollower, SLACK_PX } from '../src/follow';

/** A scrolled box: content of `scrollHeight` px seen through `clientHeight` px. */
class Box implements IScrolled {
  scrollHeight = 100;
  clientHeight = 100;
  private _top = 0;
  private _listener: (() => void) | null = null;

  get scrollTop(): number {
    return this._top;
  }

  set scrollTop(value: number) {
    this._top = Math.max(0, Math.min(value, this.scrollHeight - this.clientHeight));
  }

  addEventListener(_type: 'scroll', listener: () => void): void {
    this._listener = listener;
  }

  removeEventListener(): void {
    this._listener = null;
  }

  /** Content grew by `px` (no scroll event: the view stays where it is). */
  grow(px: number): void {
    this.scrollHeight += px;
  }

  /** The user (or the page) scrolled to `top`: the browser sends a scroll event. */
  scrollTo(top: number): void {
    this.scrollTop = top;
    this._listener?.();
  }

  get end(): number {
    return this.scrollHeight - this.clientHeight;
  }
}

describe('atEnd', () => {
  test('the end, within the slack, is the end', () => {
    assert.equal(atEnd({ scrollTop: 900, scrollHeight: 1000, clientHeight: 100 }), true);
    assert.equal(atEnd({ scrollTop: 900 - SLACK_PX, scrollHeight: 1000, clientHeight: 100 }), true);
    assert.equal(atEnd({ scrollTop: 800, scrollHeight: 1000, clientHeight: 100 }), false);
    assert.equal(atEnd({ scrollTop: 0, scrollHeight: 50, clientHeight: 100 }), true);
  });
});

describe('ScrollFollower', () => {
  test('keeps the end in view while content streams in', () => {
    const box = new Box();
    const follower = new ScrollFollower(box);
    for (let i = 0; i < 5; i++) {
      box.grow(300);
      follower.follow();
      assert.equal(box.scrollTop, box.end);
      box.scrollTo(box.scrollTop); // the scroll event of its own scrolling
    }
    assert.equal(follower.following, true);
  });

  test('leaves a user who scrolled up where they are, until they come back', () => {
    const box = new Box();
    const follower = new ScrollFollower(box);
    box.grow(1000);
    follower.follow();
    box.scrollTo(box.end - 400);
    assert.equal(follower.following, false);
    const kept = box.scrollTop;
    box.grow(500);
    follower.follow();
    assert.equal(box.scrollTop, kept);
    box.scrollTo(box.end);
    assert.equal(follower.following, true);
    box.grow(200);
    follower.follow();
    assert.equal(box.scrollTop, box.end);
  });

  test('a new ask brings the view to the end even after the user scrolled up', () => {
    const box = new Box();
    const follower = new ScrollFollower(box);
    box.grow(1000);
    follower.follow();
    box.scrollTo(100);
    box.grow(300);
    follower.newest();
    assert.equal(box.scrollTop, box.end);
    assert.equal(follower.following, true);
  });

  test('content that grew before the follow, seen by a scroll event, is no move of the user', () => {
    const box = new Box();
    const follower = new ScrollFollower(box);
    box.grow(1000);
    follower.follow();
    box.grow(400); // an image loaded: no render, no mutation the follower saw yet
    box.scrollTo(box.scrollTop); // the scroll event of the earlier scroll comes now
    assert.equal(follower.following, true);
    follower.follow();
    assert.equal(box.scrollTop, box.end);
  });

  test('dispose stops listening', () => {
    const box = new Box();
    const follower = new ScrollFollower(box);
    follower.dispose();
    box.grow(500);
    box.scrollTo(0);
    assert.equal(follower.following, true);
  });
});
