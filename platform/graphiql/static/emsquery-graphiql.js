// Starts GraphiQL on the page rendered by platform/graphiql. It lives in its own file rather than
// inline so that the page's Content-Security-Policy can say script-src 'self' with no
// 'unsafe-inline'. Everything page-specific comes from data- attributes, which html/template
// escapes; the headers JSON is built here with JSON.stringify, so a header name can never break
// out of a string.
(function () {
  'use strict';
  var root = document.getElementById('graphiql');
  var endpoint = root.getAttribute('data-endpoint');
  var headerName = root.getAttribute('data-header-name') || '';

  var headers = {};
  if (headerName) headers[headerName] = '';
  var defaultHeaders = JSON.stringify(headers, null, 2);

  var defaultQuery =
    '# EMS analytics GraphQL: ' + endpoint + '\n' +
    '#\n' +
    '# 1. Put your API key into the Headers tab below.\n' +
    '#    The schema (Docs, autocompletion) then loads.\n' +
    '# 2. Write a query here.\n' +
    '# 3. Run it with Ctrl-Enter or the run button.\n';

  // The key is the value of the configured header in the headers editor (any letter case,
  // as HTTP header names are case-insensitive).
  function hasKey(headers) {
    if (!headerName) return true;
    for (var k in headers || {}) {
      if (k.toLowerCase() === headerName.toLowerCase() && headers[k]) return true;
    }
    return false;
  }

  // GraphiQL fetches the schema as soon as the page opens, before anyone could have typed a
  // key; the service would answer 401 and GraphiQL would show that in the result pane. Answer
  // that introspection here instead, with what to do; the schema is fetched for real once a
  // key is there (see RefetchSchemaOnHeaderEdit).
  var KEY_HINT = 'The schema (Docs, autocompletion) loads as soon as it is there.';
  var httpFetcher = GraphiQL.createFetcher({ url: endpoint });
  function fetcher(params, opts) {
    if (params && params.operationName === 'IntrospectionQuery' && !hasKey(opts && opts.headers)) {
      return Promise.resolve({
        errors: [{ message: 'Put your API key into the Headers tab below, as the value of ' +
          headerName + '. ' + KEY_HINT }]
      });
    }
    if (isSubscription(params, opts && opts.documentAST)) return subscribe(params, opts && opts.headers);
    return httpFetcher(params, opts);
  }

  // GraphiQL hands over the editor's parsed document, but it is re-parsed 100 ms after each edit
  // and GraphiQL may add leaf fields to the query before running it: trust it only when it was
  // parsed from the very text being sent, else look at that text (comments dropped).
  function isSubscription(params, doc) {
    var query = (params && params.query) || '';
    var name = params && params.operationName;
    if (doc && doc.loc && doc.loc.source && doc.loc.source.body === query) {
      var ops = doc.definitions.filter(function (d) { return d.kind === 'OperationDefinition'; });
      var op = name ? ops.filter(function (d) { return d.name && d.name.value === name; })[0] : ops[0];
      return !!op && op.operation === 'subscription';
    }
    var text = query.replace(/#[^\n\r]*/g, '');
    if (name) return /^\w+$/.test(name) && new RegExp('\\bsubscription\\s+' + name + '\\b').test(text);
    return /^\s*subscription\b/.test(text);
  }

  // A subscription is served as GraphQL over Server-Sent Events (the graphql-sse protocol's
  // distinct connections mode): one POST per subscription whose response body is the event
  // stream. GraphiQL 3 takes an async iterable and shows each value as the current result; a
  // refusal is an ordinary JSON body and is shown as a query's would be.
  async function subscribe(params, userHeaders) {
    var controller = new AbortController();
    // Headers, not an object: a user's own "accept" must be replaced, not joined to ours.
    var headers = new Headers(userHeaders || {});
    headers.set('Content-Type', 'application/json');
    headers.set('Accept', 'text/event-stream');
    var response = await fetch(endpoint, {
      method: 'POST', headers: headers, body: JSON.stringify(params), signal: controller.signal
    });
    if (!/^text\/event-stream/.test(response.headers.get('Content-Type') || '')) {
      var body = await response.text();
      try {
        return JSON.parse(body);
      } catch (e) {
        throw new Error('HTTP ' + response.status + ': ' + body);
      }
    }
    return sseResults(response.body.getReader(), controller);
  }

  // sseResults reads the event stream (WHATWG rules: lines up to a blank one; ':' starts a
  // comment, here the service's heartbeats) into the data of each "next" event; "complete" ends
  // it. The object is its own iterator because GraphiQL's stop button calls
  // iterable[Symbol.asyncIterator]().return(), which must reach this stream and abort its fetch.
  function sseResults(reader, controller) {
    var decoder = new TextDecoder();
    var buffer = '';
    var event = '';
    var data = null;
    var results = [];
    var done = false;
    function parse() {
      var m;
      // A '\r' at the end of the buffer may be half of a '\r\n' split across chunks: wait.
      while ((m = /\r\n|\n|\r(?=[^\n])/.exec(buffer))) {
        var line = buffer.slice(0, m.index);
        buffer = buffer.slice(m.index + m[0].length);
        if (line === '') {
          if (event === 'next' && data !== null) results.push(JSON.parse(data));
          if (event === 'complete') done = true;
          event = '';
          data = null;
          continue;
        }
        var colon = line.indexOf(':');
        if (colon === 0) continue;
        var field = colon < 0 ? line : line.slice(0, colon);
        var value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'event') event = value;
        else if (field === 'data') data = data === null ? value : data + '\n' + value;
      }
    }
    var iterator = {
      next: async function () {
        while (!results.length && !done) {
          var chunk;
          try {
            chunk = await reader.read();
          } catch (e) {
            if (controller.signal.aborted) break;
            throw e;
          }
          if (chunk.done) {
            if (!done) throw new Error('The stream ended without "complete": the connection was cut.');
            break;
          }
          buffer += decoder.decode(chunk.value, { stream: true });
          parse();
        }
        if (results.length) return { value: results.shift(), done: false };
        iterator.return();
        return { value: undefined, done: true };
      },
      return: function () {
        done = true;
        controller.abort();
        return Promise.resolve({ value: undefined, done: true });
      }
    };
    iterator[Symbol.asyncIterator] = function () { return iterator; };
    return iterator;
  }

  // GraphiQL only fetches the schema on load and on its re-fetch button; fetch it again once
  // the headers stop changing and parse, so that typing the key is enough to get the Docs and
  // autocompletion. It renders nothing: it sits in GraphiQL's footer only to be inside the
  // React tree where GraphiQL's contexts are.
  function RefetchSchemaOnHeaderEdit() {
    var schemaContext = GraphiQL.React.useSchemaContext({ nonNull: true });
    var editorContext = GraphiQL.React.useEditorContext({ nonNull: true });
    var headerEditor = editorContext.headerEditor;
    var responseEditor = editorContext.responseEditor;
    var introspect = schemaContext.introspect;
    var schema = schemaContext.schema;
    var fetchError = schemaContext.fetchError;

    // Once the schema has loaded, take the "put your key in" hint out of the result pane
    // (GraphiQL leaves a schema error there after the error is gone).
    React.useEffect(function () {
      if (schema && !fetchError && responseEditor && responseEditor.getValue().indexOf(KEY_HINT) !== -1) {
        responseEditor.setValue('');
      }
    }, [schema, fetchError, responseEditor]);
    React.useEffect(function () {
      if (!headerEditor) return undefined;
      var timer = null;
      var last = headerEditor.getValue();
      function onChange() {
        clearTimeout(timer);
        timer = setTimeout(function () {
          var value = headerEditor.getValue();
          if (value === last) return;
          try {
            JSON.parse(value);
          } catch (e) {
            return; // still being typed
          }
          last = value;
          introspect();
        }, 700);
      }
      headerEditor.on('change', onChange);
      return function () {
        clearTimeout(timer);
        headerEditor.off('change', onChange);
      };
    }, [headerEditor, introspect]);
    return null;
  }

  // The three GraphQL endpoints share one origin, and GraphiQL keeps its tabs and history in
  // localStorage under fixed keys; prefixing the keys with the endpoint keeps each endpoint's
  // queries apart.
  //
  // The API key must never sit in localStorage. shouldPersistHeaders: false (below) keeps it out
  // of the tabs, but GraphiQL 3 still saves each run's headers in its history ("queries",
  // "favorites"). So every stored value has its "headers" strings replaced by the empty template
  // (picking an old history entry after a reload then shows {"<header>": ""} again, as a fresh
  // page does), and a "headers" item itself is never written.
  var prefix = 'emsquery:' + endpoint + ':';
  function withoutHeaders(value) {
    if (typeof value !== 'string' || value.charAt(0) !== '{') return value;
    try {
      return JSON.stringify(JSON.parse(value), function (k, v) {
        return k === 'headers' && typeof v === 'string' ? defaultHeaders : v;
      });
    } catch (e) {
      return value;
    }
  }
  var storage = null;
  try {
    var ls = window.localStorage;
    var ownKeys = function () {
      var keys = [];
      for (var i = 0; i < ls.length; i++) {
        var k = ls.key(i);
        if (k !== null && k.indexOf(prefix) === 0) keys.push(k);
      }
      return keys;
    };
    storage = {
      getItem: function (k) { return ls.getItem(prefix + k); },
      setItem: function (k, v) {
        if (/(^|:)headers$/.test(k)) return;
        ls.setItem(prefix + k, withoutHeaders(v));
      },
      removeItem: function (k) { ls.removeItem(prefix + k); },
      clear: function () { ownKeys().forEach(function (k) { ls.removeItem(k); }); },
      get length() { return ownKeys().length; }
    };
  } catch (e) {
    storage = null; // localStorage disabled: GraphiQL then keeps nothing between visits.
  }

  var props = {
    fetcher: fetcher,
    // defaultHeaders seeds the first tab and every new tab. The headers prop is not used: it
    // is forced onto the editor whenever it changes and mixed into GraphiQL's matching of
    // stored tabs, neither of which a fixed template needs.
    defaultHeaders: defaultHeaders,
    shouldPersistHeaders: false,
    defaultQuery: defaultQuery,
    // Open the headers pane so that the key field is the first thing a person sees.
    defaultEditorToolsVisibility: 'headers'
  };
  if (storage) props.storage = storage;

  root.textContent = '';
  ReactDOM.createRoot(root).render(
    React.createElement(GraphiQL, props,
      React.createElement(GraphiQL.Footer, null, React.createElement(RefetchSchemaOnHeaderEdit))));
})();
