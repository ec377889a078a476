/**
 * The server routes the labextension calls (the only file that knows URLs).
 */
import { PageConfig, URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

/** A provider the key form offers; whether the server holds a key, never the key. */
export interface IKeyProvider {
  name: string;
  label: string;
  configured: boolean;
  keyless_with_url: boolean;
}

/** `GET /jupyter-ci/config` (docs/protocol.md section 3). */
export interface IServerConfig {
  models: string[];
  default_model: string | null;
  problem: string | null;
  providers: IKeyProvider[];
}

/** What the panel's key form sends to `POST /jupyter-ci/keys`. */
export interface IKeyRequest {
  provider: string;
  key: string;
  base_url: string;
  remember: boolean;
}

/** What listing the provider's models with a saved key said (the server asks, not the page). */
export interface IKeyCheck {
  ok: boolean;
  message: string;
}

/** An error the panel can show as it is. */
export class ApiError extends Error {}

async function requestJSON(path: string, init: RequestInit = {}): Promise<unknown> {
  const settings = ServerConnection.makeSettings();
  const url = URLExt.join(settings.baseUrl, path);
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, init, settings);
  } catch (error) {
    throw new ApiError(`Could not reach the Jupyter server: ${String(error)}`);
  }
  const text = await response.text();
  let body: unknown = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  if (!response.ok) {
    if (response.status === 404 && !hasMessage(body)) {
      throw new ApiError(
        'The jupyter-ci server extension is not enabled (GET /jupyter-ci/config: 404). ' +
          'Run `jupyter server extension enable jupyter_ci` and restart Jupyter.'
      );
    }
    const message = hasMessage(body) ? body.message : response.statusText;
    throw new ApiError(
      response.status === 400 ? message : `jupyter-ci server error ${response.status}: ${message}`
    );
  }
  return body;
}

/** Tell a reply of the server's that says what went wrong (`{"message": ...}`). */
function hasMessage(body: unknown): body is { message: string } {
  return typeof (body as { message?: unknown } | null)?.message === 'string';
}

function asProviders(value: unknown): IKeyProvider[] {
  if (!Array.isArray(value)) {
    return [];
  }
  return value
    .filter((p): p is IKeyProvider => typeof p?.name === 'string' && typeof p?.label === 'string')
    .map(p => ({
      name: p.name,
      label: p.label,
      configured: p.configured === true,
      keyless_with_url: p.keyless_with_url === true
    }));
}

/** Fetch the models the server offers and what is missing if none. */
export async function fetchConfig(): Promise<IServerConfig> {
  return asConfig(await requestJSON('jupyter-ci/config'));
}

/**
 * Give the server a key pasted in the panel. The server checks it with the provider and keeps
 * it (the reply, the new configuration, never holds it); returns where it was saved ('' when
 * only in memory) and what the check said. A key the provider refuses is an ApiError.
 */
export async function saveKey(
  request: IKeyRequest
): Promise<{ config: IServerConfig; saved: string; check: IKeyCheck }> {
  const body = await requestJSON('jupyter-ci/keys', {
    method: 'POST',
    body: JSON.stringify(request)
  });
  const reply = body as { saved?: unknown; check?: { ok?: unknown; message?: unknown } } | null;
  const saved = reply?.saved;
  const check: IKeyCheck = {
    ok: reply?.check?.ok !== false,
    message: typeof reply?.check?.message === 'string' ? reply.check.message : ''
  };
  return { config: asConfig(body), saved: typeof saved === 'string' ? saved : '', check };
}

/**
 * Have the server forget a provider's key and base URL (in memory and in its key file);
 * returns the new configuration and what the server says it removed.
 */
export async function removeKey(provider: string): Promise<{ config: IServerConfig; removed: string }> {
  const body = await requestJSON(`jupyter-ci/keys?provider=${encodeURIComponent(provider)}`, {
    method: 'DELETE'
  });
  const removed = (body as { removed?: unknown } | null)?.removed;
  return { config: asConfig(body), removed: typeof removed === 'string' ? removed : '' };
}

function asConfig(value: unknown): IServerConfig {
  const body = value as Partial<IServerConfig> | null;
  const models = Array.isArray(body?.models)
    ? body.models.filter((m): m is string => typeof m === 'string')
    : [];
  return {
    models,
    default_model: typeof body?.default_model === 'string' ? body.default_model : null,
    problem: typeof body?.problem === 'string' ? body.problem : null,
    providers: asProviders(body?.providers)
  };
}

/** One model's share of a user's spending on the JupyterHub service (jupyter_ci/wire/hub.py). */
export interface IModelSpending {
  model: string;
  turns: number;
  input_tokens: number;
  output_tokens: number;
  cached_tokens: number;
  cost_usd: number;
}

/** One budget of the Hub's policy: its limit, what is used, when it resets (UTC, ISO 8601). */
export interface IHubLimit {
  name: string;
  limit: number;
  used: number;
  resets: string;
  source: string;
}

/** `GET /jupyter-ci/spending`: the user's spending under a JupyterHub (docs/hub.md). */
export interface IHubSpending {
  user: string;
  day: string;
  month: string;
  today: IModelSpending[];
  this_month: IModelSpending[];
  limits?: IHubLimit[];
}

/** False once the server said it keeps no spending (404): it will not start to. */
let spendingKept = true;

/**
 * The user's spending as the JupyterHub's jupyter-ci service keeps it, or null when this
 * server is not under such a Hub or cannot say now: the panel then shows nothing. Only a
 * page a JupyterHub serves asks (the Hub sets its page config's `hubPrefix`), and only
 * until a 404 (a Hub without the service): the browser logs each refused request as an
 * error, and a single server would refuse every one.
 */
export async function fetchHubSpending(): Promise<IHubSpending | null> {
  if (!spendingKept || !PageConfig.getOption('hubPrefix')) {
    return null;
  }
  const settings = ServerConnection.makeSettings();
  const url = URLExt.join(settings.baseUrl, 'jupyter-ci/spending');
  try {
    const response = await ServerConnection.makeRequest(url, {}, settings);
    if (response.status === 404) {
      spendingKept = false;
      return null;
    }
    const body = (await response.json()) as Partial<IHubSpending> | null;
    if (!response.ok || !Array.isArray(body?.this_month)) {
      return null;
    }
    return body as IHubSpending;
  } catch {
    return null;
  }
}

/** What the server knows of a kernel: model-written code ran there; it runs in a box. */
export interface IKernelMarks {
  model_code: boolean;
  sandboxed: boolean;
}

/**
 * Ask (GET) or tell (POST: model-written code runs there now) the server about a kernel
 * (server/broker/model_code.py). Null when the server has no such route (the server extension
 * is not enabled): the page then knows only what it saw itself. Throws when the server
 * cannot say (the page then trusts none of the kernel's outputs).
 */
export async function kernelMarks(
  kernelId: string,
  method: 'GET' | 'POST' = 'GET'
): Promise<IKernelMarks | null> {
  const settings = ServerConnection.makeSettings();
  const path = `jupyter-ci/kernels/${encodeURIComponent(kernelId)}/model-code`;
  const url = URLExt.join(settings.baseUrl, path);
  const response = await ServerConnection.makeRequest(url, { method }, settings);
  const body = (await response.json().catch(() => null)) as Partial<IKernelMarks> & {
    reason?: unknown;
  } | null;
  if (response.status === 404 && body?.reason !== 'no_such_kernel') {
    return null;
  }
  if (!response.ok || body === null) {
    throw new ApiError(`jupyter-ci could not say what ran in kernel ${kernelId}.`);
  }
  return { model_code: body.model_code === true, sandboxed: body.sandboxed === true };
}

/** Whether agents may edit and run a notebook's cells, and why (`/jupyter-ci/notebooks/consent`). */
export interface INotebookConsent {
  path: string;
  allowed: boolean;
  /** The server's reason, to show as it is. */
  why: string;
  /** The server's setting (`c.JupyterCI.agent_notebooks`). */
  setting: string;
}

/**
 * Tell the server the user opened a notebook in this page (their consent, by the default
 * setting, to agents editing and running it). A server without the route (an older one) or
 * any failure is ignored: the page works as before.
 */
export async function notebookOpened(path: string): Promise<void> {
  const settings = ServerConnection.makeSettings();
  const url = URLExt.join(settings.baseUrl, 'jupyter-ci/notebooks/opened');
  const init = { method: 'POST', body: JSON.stringify({ path }) };
  await ServerConnection.makeRequest(url, init, settings).catch(() => undefined);
}

/** Ask the server whether agents may edit and run a notebook. */
export async function notebookConsent(path: string): Promise<INotebookConsent> {
  const query = `?path=${encodeURIComponent(path)}`;
  return asConsent(await requestJSON(`jupyter-ci/notebooks/consent${query}`), path);
}

/** Let agents edit and run a notebook (`allow`), or stop letting them; returns the new state. */
export async function setNotebookConsent(path: string, allow: boolean): Promise<INotebookConsent> {
  const body = await requestJSON('jupyter-ci/notebooks/consent', {
    method: 'PUT',
    body: JSON.stringify({ path, allow })
  });
  return asConsent(body, path);
}

function asConsent(value: unknown, path: string): INotebookConsent {
  const body = value as Partial<INotebookConsent> | null;
  return {
    path: typeof body?.path === 'string' ? body.path : path,
    allowed: body?.allowed === true,
    why: typeof body?.why === 'string' ? body.why : '',
    setting: typeof body?.setting === 'string' ? body.setting : ''
  };
}

/** `GET /jupyter-ci/box?kernel=<id>` (wire/box.py BoxStatus): a kernel's box, as the page shows it. */
export interface IBoxStatus {
  kernel: string;
  boxed: boolean;
  /** Why it is not boxed ("" when it is). */
  reason: string;
  /** The notebook the kernel was started for, relative to Jupyter's root. */
  notebook: string;
  setting: string;
  may_unbox: boolean;
  /** Hosts the box may reach besides its loopback. */
  network: string[];
  /** Hosts the box was refused lately, newest last. */
  refused: string[];
}

/** Ask the server whether a kernel runs in a box (null: no such route or kernel). */
export async function boxStatus(kernelId: string): Promise<IBoxStatus | null> {
  try {
    const body = (await requestJSON(
      `jupyter-ci/box?kernel=${encodeURIComponent(kernelId)}`
    )) as Partial<IBoxStatus> | null;
    if (body === null || typeof body.boxed !== 'boolean') {
      return null;
    }
    const strings = (value: unknown): string[] =>
      Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
    return {
      kernel: kernelId,
      boxed: body.boxed,
      reason: typeof body.reason === 'string' ? body.reason : '',
      notebook: typeof body.notebook === 'string' ? body.notebook : '',
      setting: typeof body.setting === 'string' ? body.setting : '',
      may_unbox: body.may_unbox === true,
      network: strings(body.network),
      refused: strings(body.refused)
    };
  } catch {
    return null;
  }
}

/** Run one notebook's kernels boxed or not, from their next start (`PUT /jupyter-ci/box/notebook`). */
export async function setNotebookBoxed(path: string, boxed: boolean): Promise<void> {
  await requestJSON('jupyter-ci/box/notebook', {
    method: 'PUT',
    body: JSON.stringify({ path, boxed })
  });
}

/** Let one notebook's boxes reach a host, now and later (`POST /jupyter-ci/box/hosts`). */
export async function allowBoxHost(path: string, host: string): Promise<void> {
  await requestJSON('jupyter-ci/box/hosts', {
    method: 'POST',
    body: JSON.stringify({ path, host })
  });
}
