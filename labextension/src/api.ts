/**
 * The server routes the labextension calls (the only file that knows URLs).
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

/** `GET /jupyter-ci/config` (docs/protocol.md section 3). */
export interface IServerConfig {
  models: string[];
  default_model: string | null;
  problem: string | null;
}

/** An error the panel can show as it is. */
export class ApiError extends Error {}

async function requestJSON(path: string): Promise<unknown> {
  const settings = ServerConnection.makeSettings();
  const url = URLExt.join(settings.baseUrl, path);
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, {}, settings);
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
    if (response.status === 404) {
      throw new ApiError(
        'The jupyter-ci server extension is not enabled (GET /jupyter-ci/config: 404). ' +
          'Run `jupyter server extension enable jupyter_ci` and restart Jupyter.'
      );
    }
    const message =
      body !== null && typeof body === 'object' && 'message' in body
        ? String((body as { message: unknown }).message)
        : response.statusText;
    throw new ApiError(`jupyter-ci server error ${response.status}: ${message}`);
  }
  return body;
}

/** Fetch the models the server offers and what is missing if none. */
export async function fetchConfig(): Promise<IServerConfig> {
  const body = (await requestJSON('jupyter-ci/config')) as Partial<IServerConfig> | null;
  const models = Array.isArray(body?.models)
    ? body.models.filter((m): m is string => typeof m === 'string')
    : [];
  return {
    models,
    default_model: typeof body?.default_model === 'string' ? body.default_model : null,
    problem: typeof body?.problem === 'string' ? body.problem : null
  };
}
