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
    return httpFetcher(params, opts);
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
