/**
 * The page's side of the notebook door (notebookdoor.ts): the server hears of each notebook
 * opened here and of its renames; the consent is asked, kept and changed per notebook.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';

import type { DocumentRegistry } from '@jupyterlab/docregistry';
import type { INotebookModel } from '@jupyterlab/notebook';
import { Signal } from '@lumino/signaling';

import type { INotebookConsent } from '../src/api';
import { consentText, IDoorApi, NotebookDoor, userGesture } from '../src/notebookdoor';

/** The server's routes, as the door calls them: each call logged, consent kept per path. */
class FakeServer implements IDoorApi {
  readonly calls: string[] = [];
  readonly allowed = new Map<string, boolean>();
  routes = true;
  async opened(path: string): Promise<void> {
    this.calls.push(`opened ${path}`);
  }
  async consent(path: string): Promise<INotebookConsent> {
    this.calls.push(`consent ${path}`);
    if (!this.routes) {
      throw new Error('404');
    }
    return this._state(path);
  }
  async setConsent(path: string, allow: boolean): Promise<INotebookConsent> {
    this.calls.push(`set ${path} ${allow}`);
    this.allowed.set(path, allow);
    return this._state(path);
  }
  private _state(path: string): INotebookConsent {
    const allowed = this.allowed.get(path) ?? true;
    return { path, allowed, why: allowed ? 'opened' : 'withdrawn', setting: 'opened' };
  }
}

/** A notebook's document context: a path that may change, ready at once. */
function context(path: string) {
  const fake = {
    path,
    isDisposed: false,
    ready: Promise.resolve(),
    pathChanged: new Signal<unknown, string>({}),
    rename(to: string) {
      fake.path = to;
      fake.pathChanged.emit(to);
    }
  };
  return fake;
}

const settle = (): Promise<void> => new Promise(resolve => setTimeout(resolve, 0));

test('the server hears of a notebook opened here, and of its new path', async () => {
  const server = new FakeServer();
  const door = new NotebookDoor(path => path.replace(/^RTC:/, ''), server);
  const changes: number[] = [];
  door.onChange = () => changes.push(1);
  const nb = context('RTC:work/a.ipynb');
  door.follow(nb as unknown as DocumentRegistry.IContext<INotebookModel>, Promise.resolve());
  await settle();
  assert.deepEqual(server.calls, ['consent work/a.ipynb', 'opened work/a.ipynb', 'consent work/a.ipynb']);
  assert.equal(door.consent('RTC:work/a.ipynb')?.allowed, true);
  nb.rename('RTC:work/b.ipynb');
  await settle();
  assert.deepEqual(server.calls.slice(3), ['opened work/b.ipynb', 'consent work/b.ipynb']);
  assert.ok(changes.length >= 2);
});

test('a notebook the page opened without a gesture of the user (a navigation) is not "opened"', async () => {
  const server = new FakeServer();
  const door = new NotebookDoor(path => path, server);
  let touch: () => void = () => undefined;
  const gesture = new Promise<void>(resolve => (touch = resolve));
  const nb = context('a.ipynb');
  door.follow(nb as unknown as DocumentRegistry.IContext<INotebookModel>, gesture);
  await settle();
  nb.rename('b.ipynb');
  await settle();
  // Only read: nothing said the user opened it, not even its rename.
  assert.deepEqual(server.calls, ['consent a.ipynb', 'consent b.ipynb']);
  touch();
  await settle();
  assert.deepEqual(server.calls.slice(2), ['opened b.ipynb', 'consent b.ipynb']);
});

test("a script's events are no gesture; the user's are", async () => {
  const node = new EventTarget();
  let seen = false;
  void userGesture(node).then(() => (seen = true));
  node.dispatchEvent(new Event('pointerdown'));
  node.dispatchEvent(new Event('keydown'));
  await settle();
  assert.equal(seen, false);
  // What the browser itself dispatches for a real click says isTrusted (Node's never do).
  const real = new Event('pointerdown');
  Object.defineProperty(real, 'isTrusted', { value: true });
  node.dispatchEvent(real);
  await settle();
  assert.equal(seen, true);
});

test("the consent is changed on the server, and what it says is kept", async () => {
  const server = new FakeServer();
  const door = new NotebookDoor(path => path, server);
  const state = await door.set('a.ipynb', false);
  assert.deepEqual(state, { path: 'a.ipynb', allowed: false, why: 'withdrawn', setting: 'opened' });
  assert.equal(door.consent('a.ipynb')?.allowed, false);
  assert.equal(door.consent('other.ipynb'), null);
});

test('an older server without the routes is no trouble: nothing is known', async () => {
  const server = new FakeServer();
  server.routes = false;
  const door = new NotebookDoor(path => path, server);
  door.follow(context('a.ipynb') as unknown as DocumentRegistry.IContext<INotebookModel>, Promise.resolve());
  await settle();
  assert.equal(door.consent('a.ipynb'), null);
});

test("the server's answer, said in a sentence", () => {
  const state = (allowed: boolean, why: string, setting = 'opened'): INotebookConsent => ({
    path: 'a.ipynb',
    allowed,
    why,
    setting
  });
  assert.equal(consentText(state(true, 'allowed')), 'Agents may edit and run a.ipynb: you let them.');
  assert.match(consentText(state(true, 'opened')), /may edit and run a\.ipynb: you opened it/);
  assert.match(consentText(state(false, 'not_opened')), /^Agents may not edit or run a\.ipynb: you neither/);
  assert.match(
    consentText(state(true, 'always', 'always')),
    /every notebook \(c\.JupyterCI\.agent_notebooks = 'always'\)\.$/
  );
  assert.equal(consentText(state(false, 'something new')), 'Agents may not edit or run a.ipynb: something new.');
});
