/**
 * Following a session's current kernel (comm.ts and frontend.ts both use it).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import type { ISessionContext } from '@jupyterlab/apputils';
import type { Kernel } from '@jupyterlab/services';
import { Signal } from '@lumino/signaling';

import { KernelFollower } from '../src/kernelfollower';

/** A kernel connection as the follower sees it: a name, a status signal, disposal. */
class FakeKernel {
  constructor(readonly name: string) {}
  isDisposed = false;
  readonly statusChanged = new Signal<this, Kernel.Status>(this);
}

/** A session context with a current kernel that can change. */
class FakeSession {
  constructor(public kernel: FakeKernel | null) {}
  get session(): { kernel: FakeKernel | null } {
    return { kernel: this.kernel };
  }
  readonly kernelChanged = new Signal<this, { newValue: FakeKernel | null }>(this);
  change(kernel: FakeKernel | null): void {
    this.kernel = kernel;
    this.kernelChanged.emit({ newValue: kernel });
  }
}

function follow(session: FakeSession): { follower: KernelFollower; log: string[] } {
  const log: string[] = [];
  const name = (k: unknown) => (k as FakeKernel | null)?.name ?? 'none';
  const follower = new KernelFollower(session as unknown as ISessionContext, {
    attach: k => log.push(`attach ${name(k)}`),
    detach: k => log.push(`detach ${name(k)}`),
    changed: k => log.push(`changed ${name(k)}`),
    status: (k, status) => log.push(`${name(k)} ${status}`)
  });
  return { follower, log };
}

describe('KernelFollower', () => {
  test('attaches the current kernel, then each new one in its place', () => {
    const first = new FakeKernel('k1');
    const session = new FakeSession(first);
    const { follower, log } = follow(session);
    assert.equal(follower.kernel as unknown, first);
    const second = new FakeKernel('k2');
    session.change(second);
    session.change(null);
    assert.deepEqual(log, ['attach k1', 'changed k2', 'detach k1', 'attach k2', 'changed none', 'detach k2']);
    assert.equal(follower.kernel, null);
  });

  test("passes on the attached kernel's status only", () => {
    const first = new FakeKernel('k1');
    const session = new FakeSession(first);
    const { log } = follow(session);
    first.statusChanged.emit('restarting');
    const second = new FakeKernel('k2');
    session.change(second);
    first.statusChanged.emit('dead');
    second.statusChanged.emit('autorestarting');
    assert.deepEqual(log.filter(line => !/^(attach|detach|changed)/.test(line)), [
      'k1 restarting',
      'k2 autorestarting'
    ]);
  });

  test('skips a disposed kernel, and lets go of all when disposed', () => {
    const session = new FakeSession(null);
    const { follower, log } = follow(session);
    const gone = new FakeKernel('gone');
    gone.isDisposed = true;
    session.change(gone);
    const live = new FakeKernel('live');
    session.change(live);
    follower.dispose();
    follower.dispose();
    session.change(new FakeKernel('later'));
    live.statusChanged.emit('dead');
    assert.deepEqual(log, ['changed gone', 'changed live', 'attach live', 'detach live']);
    assert.equal(follower.isDisposed, true);
  });
});
