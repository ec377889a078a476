/**
 * The page's account of kernels where model-written code ran (outputtrust.ts): what it holds
 * before, while and after the server answers, and what a restart does.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import type { IKernelMarks } from '../src/api';
import { KernelMarks } from '../src/outputtrust';

/** A server whose answers the test releases one by one, recording each question. */
class FakeServer {
  readonly asked: string[] = [];
  readonly marked = new Set<string>();
  sandboxed = false;
  /** Undefined: the route exists; null: it does not (the server extension is off). */
  missing = false;
  failing = false;
  private readonly _pending: (() => void)[] = [];

  readonly fetch = (kernelId: string, method: 'GET' | 'POST'): Promise<IKernelMarks | null> => {
    this.asked.push(`${method} ${kernelId}`);
    return new Promise((resolve, reject) => {
      this._pending.push(() => {
        if (this.failing) {
          reject(new Error('server error'));
          return;
        }
        if (method === 'POST') {
          this.marked.add(kernelId);
        }
        resolve(
          this.missing
            ? null
            : { model_code: this.marked.has(kernelId), sandboxed: this.sandboxed }
        );
      });
    });
  };

  /** Answer every question asked so far, in order. */
  async answer(): Promise<void> {
    for (const release of this._pending.splice(0)) {
      release();
    }
    await new Promise(resolve => setImmediate(resolve));
  }
}

describe('KernelMarks', () => {
  test('a kernel is unknown (untrusted) until the server answers, then clean', async () => {
    const server = new FakeServer();
    const marks = new KernelMarks(server.fetch);
    assert.equal(marks.state(null), 'clean');
    marks.refresh('k1');
    assert.equal(marks.state('k1'), 'unknown');
    await server.answer();
    assert.equal(marks.state('k1'), 'clean');
  });

  test("the page's mark holds at once, before the server answers, and the server keeps it", async () => {
    const server = new FakeServer();
    const marks = new KernelMarks(server.fetch);
    marks.refresh('k1');
    await server.answer();
    marks.mark('k1');
    assert.equal(marks.state('k1'), 'model_code');
    await server.answer();
    assert.deepEqual(server.asked, ['GET k1', 'POST k1']);
    marks.mark('k1'); // both know: nothing more to tell
    assert.deepEqual(server.asked, ['GET k1', 'POST k1']);
    // A reload: a new page knows only what the server says.
    const reloaded = new KernelMarks(server.fetch);
    reloaded.refresh('k1');
    await server.answer();
    assert.equal(reloaded.state('k1'), 'model_code');
  });

  test('an answer to an older question does not undo a mark made since', async () => {
    const server = new FakeServer();
    const marks = new KernelMarks(server.fetch);
    marks.refresh('k1'); // answered "clean" below, but after the mark
    marks.mark('k1');
    await server.answer();
    assert.equal(marks.state('k1'), 'model_code');
  });

  test('a status saying "restarting" does not clear a mark the server holds', async () => {
    const server = new FakeServer();
    const marks = new KernelMarks(server.fetch);
    marks.mark('k1');
    await server.answer();
    marks.refresh('k1', true); // the kernel itself can send such a status
    assert.equal(marks.state('k1'), 'unknown');
    await server.answer();
    assert.equal(marks.state('k1'), 'model_code');
    server.marked.delete('k1'); // a real restart: the server forgot the mark
    marks.refresh('k1', true);
    await server.answer();
    assert.equal(marks.state('k1'), 'clean');
  });

  test('a sandboxed kernel stays sandboxed, marked or not', async () => {
    const server = new FakeServer();
    server.sandboxed = true;
    const marks = new KernelMarks(server.fetch);
    marks.refresh('box');
    await server.answer();
    assert.equal(marks.state('box'), 'sandboxed');
    marks.mark('box');
    await server.answer();
    assert.equal(marks.state('box'), 'sandboxed');
  });

  test('without the server route the page trusts what it saw itself', async () => {
    const server = new FakeServer();
    server.missing = true;
    const marks = new KernelMarks(server.fetch);
    marks.refresh('k1');
    await server.answer();
    assert.equal(marks.state('k1'), 'clean');
    marks.mark('k1');
    await server.answer();
    assert.equal(marks.state('k1'), 'model_code');
  });

  test('a server that cannot answer leaves the kernel unknown (untrusted)', async () => {
    const server = new FakeServer();
    server.failing = true;
    const marks = new KernelMarks(server.fetch);
    marks.refresh('k1');
    await server.answer();
    assert.equal(marks.state('k1'), 'unknown');
    marks.refresh('k2'); // cancel the retry timer's effect by asking about another
  });
});
