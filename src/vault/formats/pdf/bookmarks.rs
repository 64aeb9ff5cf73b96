//! The outline (bookmarks): its entries with the page each names, read without
//! recursion, each node once; and the document information's title.

use std::collections::{HashMap, HashSet};

use lopdf::{Dictionary, Document, Object, ObjectId, decode_text_string};

use super::MAX_ENTRIES;

/// Longest heading kept, in characters.
const MAX_TITLE: usize = 200;

/// An outline entry: its depth (1-based, at most 6), title and page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Mark {
    pub(super) level: u8,
    pub(super) title: String,
    pub(super) page: usize,
}

/// The outline's entries in outline order, each with the page its destination names
/// (entries whose destination is no page of the document are left out).
pub(super) fn bookmarks(doc: &Document, pages: &HashMap<ObjectId, usize>) -> Vec<Mark> {
    let Ok(catalog) = doc.catalog() else {
        return Vec::new();
    };
    let Ok(root) = catalog
        .get_deref(b"Outlines", doc)
        .and_then(Object::as_dict)
    else {
        return Vec::new();
    };
    let mut names = Names::new(doc, catalog);
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    // Pre-order without recursion: a node's children come before its next sibling.
    let mut stack: Vec<(ObjectId, u8)> = Vec::new();
    if let Ok(first) = root.get(b"First").and_then(Object::as_reference) {
        stack.push((first, 1));
    }
    while let Some((id, level)) = stack.pop() {
        if !seen.insert(id) || seen.len() > MAX_ENTRIES {
            continue;
        }
        let Ok(node) = doc.get_dictionary(id) else {
            continue;
        };
        if let Ok(next) = node.get(b"Next").and_then(Object::as_reference) {
            stack.push((next, level));
        }
        if let Ok(first) = node.get(b"First").and_then(Object::as_reference) {
            stack.push((first, level.saturating_add(1)));
        }
        let title = node
            .get_deref(b"Title", doc)
            .and_then(decode_text_string)
            .map(|t| title_of(&t))
            .unwrap_or_default();
        let dest = match node.get_deref(b"Dest", doc) {
            Ok(d) => Some(d),
            Err(_) => node
                .get_deref(b"A", doc)
                .and_then(Object::as_dict)
                .ok()
                .filter(|a| {
                    a.get(b"S")
                        .and_then(Object::as_name)
                        .is_ok_and(|s| s == b"GoTo")
                })
                .and_then(|a| a.get_deref(b"D", doc).ok()),
        };
        let page = dest
            .and_then(|d| names.page_of(d))
            .and_then(|p| pages.get(&p).copied());
        if let Some(page) = page
            && !title.is_empty()
        {
            out.push(Mark {
                level: level.min(6),
                title,
                page,
            });
        }
    }
    out
}

/// A title's whitespace collapsed, cut at [`MAX_TITLE`] characters.
fn title_of(raw: &str) -> String {
    let t = raw.split_whitespace().collect::<Vec<_>>().join(" ");
    match t.char_indices().nth(MAX_TITLE) {
        Some((i, _)) => t[..i].to_string(),
        None => t,
    }
}

/// Named destinations (the catalog's `Dests` dictionary and `Names` › `Dests` tree),
/// read on the first name an entry uses.
struct Names<'a> {
    doc: &'a Document,
    catalog: &'a Dictionary,
    map: Option<HashMap<Vec<u8>, &'a Object>>,
}

impl<'a> Names<'a> {
    fn new(doc: &'a Document, catalog: &'a Dictionary) -> Self {
        Names {
            doc,
            catalog,
            map: None,
        }
    }

    /// The page a destination names: an array opening with the page, a dictionary's
    /// `D`, or a name or string looked up among the named destinations.
    fn page_of(&mut self, dest: &'a Object) -> Option<ObjectId> {
        let doc = self.doc;
        let resolve = |o: &'a Object| doc.dereference(o).ok().map(|(_, o)| o);
        let mut dest = resolve(dest)?;
        for _ in 0..3 {
            match dest {
                Object::Array(a) => return a.first()?.as_reference().ok(),
                Object::Dictionary(d) => dest = resolve(d.get(b"D").ok()?)?,
                Object::Name(n) | Object::String(n, _) => {
                    dest = resolve(self.named().get(n.as_slice()).copied()?)?
                }
                _ => return None,
            }
        }
        None
    }

    fn named(&mut self) -> &HashMap<Vec<u8>, &'a Object> {
        let (doc, catalog) = (self.doc, self.catalog);
        self.map.get_or_insert_with(|| {
            let mut map = HashMap::new();
            if let Ok(dests) = catalog.get_deref(b"Dests", doc).and_then(Object::as_dict) {
                for (k, v) in dests.iter() {
                    map.insert(k.clone(), v);
                }
            }
            let tree = catalog
                .get_deref(b"Names", doc)
                .and_then(Object::as_dict)
                .and_then(|n| n.get_deref(b"Dests", doc))
                .and_then(Object::as_dict);
            let Ok(tree) = tree else { return map };
            // The name tree, each node once, without recursion.
            let mut seen = HashSet::new();
            let mut stack = vec![tree];
            while let Some(node) = stack.pop() {
                if seen.len() > MAX_ENTRIES {
                    break;
                }
                if let Ok(kids) = node.get_deref(b"Kids", doc).and_then(Object::as_array) {
                    for kid in kids {
                        if let Ok(id) = kid.as_reference()
                            && seen.insert(id)
                            && let Ok(d) = doc.get_dictionary(id)
                        {
                            stack.push(d);
                        }
                    }
                }
                if let Ok(pairs) = node.get_deref(b"Names", doc).and_then(Object::as_array) {
                    for pair in pairs.chunks_exact(2) {
                        if let Ok(name) = pair[0].as_str() {
                            map.entry(name.to_vec()).or_insert(&pair[1]);
                        }
                    }
                }
            }
            map
        })
    }
}

/// The document information's `Title`, when it has one.
pub(super) fn info_title(doc: &Document) -> Option<String> {
    let info = doc.trailer.get_deref(b"Info", doc).ok()?.as_dict().ok()?;
    let title = title_of(&decode_text_string(info.get_deref(b"Title", doc).ok()?).ok()?);
    (!title.is_empty()).then_some(title)
}
